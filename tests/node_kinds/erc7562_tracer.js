{
  // geth's native `erc7562Tracer` written as a JavaScript tracer for anvil, so that tests can
  // exercise a bundler's native-tracer path on a node that lacks it. The output is geth's:
  // one call frame per call, each with the opcodes it used (counts keyed by hex opcode), the
  // storage slots it read and wrote, its EXTCODE* targets and the code size of every address
  // it inspected or called; the KECCAK256 inputs of the whole call on the outermost frame.
  // tracerConfig: ignoredOpcodes (hex strings; replaces the default list), withLog,
  // stackTopItemsSize (accepted; it changes nothing geth reports).
  //
  // Where anvil differs from geth, the difference is made up here:
  // - the outermost frame gets no enter/exit: it is built from the steps and from `ctx`,
  //   its error read from its last opcode (anvil's ctx.error can be a nested frame's);
  // - a frame that stops on anything but STOP, RETURN, REVERT or SELFDESTRUCT failed, even
  //   where anvil's exit carries no error (a CREATE2 that ran out of gas);
  // - a DELEGATECALL carries its caller's value and a STATICCALL none, as geth reports them;
  // - anvil's error texts are put in geth's words, and a halted frame used all its gas;
  // - memory read past its end (KECCAK256, LOG, RETURN before expansion) reads as zeros.
  // Stack values are BigInt on anvil: they are never mixed with numbers.

  ignored: null,
  withLog: false,
  frames: [],
  keccak: {},
  lastOp: -1,
  lastExt: null,
  logIndex: 0,
  rootOutput: "0x",
  pendingRead: null,

  setup: function (cfg) {
    if (cfg && cfg.withLog) this.withLog = true;
    if (cfg && cfg.ignoredOpcodes !== undefined && cfg.ignoredOpcodes !== null) {
      this.ignored = {};
      for (var i = 0; i < cfg.ignoredOpcodes.length; i++) {
        var op = cfg.ignoredOpcodes[i];
        this.ignored[typeof op === "string" ? parseInt(op, 16) : op] = true;
      }
    }
  },

  defaultIgnored: function () {
    var ignored = {};
    for (var op = 0x5f; op <= 0x9f; op++) ignored[op] = true; // PUSH0 .. SWAP16
    var plain = [0x50, 0x01, 0x03, 0x02, 0x04, 0x14, 0x10, 0x11, 0x12, 0x13, 0x1b, 0x1c,
      0x16, 0x17, 0x19, 0x15]; // POP ADD SUB MUL DIV EQ LT GT SLT SGT SHL SHR AND OR NOT ISZERO
    for (var i = 0; i < plain.length; i++) ignored[plain[i]] = true;
    return ignored;
  },

  newFrame: function (type) {
    return {
      type: type, from: null, to: null, gas: 0, gasUsed: 0, input: "0x", output: "0x",
      error: "", value: null, reads: {}, writes: {}, tReads: {}, tWrites: {},
      ext: [], used: {}, sizes: {}, oog: false, calls: [], logs: [],
      last: -1, steps: 0, logBase: 0,
    };
  },

  hex: function (n) {
    return "0x" + n.toString(16);
  },

  word: function (v) {
    var s = v.toString(16);
    while (s.length < 64) s = "0" + s;
    return "0x" + s;
  },

  addr: function (v) {
    var s = (v & BigInt("0xffffffffffffffffffffffffffffffffffffffff")).toString(16);
    while (s.length < 40) s = "0" + s;
    return "0x" + s;
  },

  memory: function (log, offset, size) {
    // geth pads a read past memory's end with zeros; anvil refuses it.
    var o = Number(offset), n = Number(size);
    if (n === 0) return "0x";
    var have = log.memory.length();
    var out = "";
    if (o < have) out = toHex(log.memory.slice(o, Math.min(o + n, have))).substring(2);
    while (out.length < 2 * n) out += "00";
    return "0x" + out;
  },

  isExt: function (op) {
    return op === 0x3b || op === 0x3c || op === 0x3f;
  },

  isCall: function (op) {
    return op === 0xf1 || op === 0xf2 || op === 0xf4 || op === 0xfa;
  },

  step: function (log, db) {
    if (this.ignored === null) this.ignored = this.defaultIgnored();
    if (this.frames.length === 0) {
      this.frames.push(this.newFrame("CALL"));
      this.frames[0].value = this.hex(BigInt(log.contract.getValue())); // for DELEGATECALLs
    }
    var frame = this.frames[this.frames.length - 1];
    var op = log.op.toNumber();
    var stack = log.stack;
    if (this.pendingRead !== null) this.settleRead(db, stack);
    frame.last = op;
    frame.steps++;
    if (op === 0xfd || op === 0xf3) {
      this.lastOp = -1; // geth links no RETURN or REVERT to the opcode before it
      if (this.frames.length === 1) this.rootOutput = this.memory(log, stack.peek(0), stack.peek(1));
    }
    if (this.lastExt !== null && this.lastOp !== -1) {
      // OP-051: EXTCODESIZE followed by ISZERO is the one code access not listed.
      if (!(this.lastOp === 0x3b && op === 0x15)) frame.ext.push(this.lastExt);
    }
    if (this.isExt(op) || this.isCall(op)) {
      var target = this.addr(stack.peek(this.isExt(op) ? 0 : 1));
      if (frame.sizes[target] === undefined) {
        frame.sizes[target] = { contractSize: db.getCode(target).length, opcode: op };
      }
    }
    if (this.lastOp === 0x5a && !this.isCall(op)) {
      frame.used[0x5a] = (frame.used[0x5a] || 0) + 1; // OP-012: GAS not right before a call
    }
    if (op !== 0x5a && !this.ignored[op]) frame.used[op] = (frame.used[op] || 0) + 1;
    if (op === 0x54 || op === 0x55 || op === 0x5c || op === 0x5d) {
      var slot = this.word(stack.peek(0));
      if (op === 0x54) {
        if (frame.reads[slot] === undefined && frame.writes[slot] === undefined) {
          // The value read is the next step's stack top: anvil's db.getState gives the
          // value before the call, where geth records the current one.
          frame.reads[slot] = [null];
          this.pendingRead = { frame: frame, slot: slot, depth: this.frames.length,
            owner: toHex(log.contract.getAddress()) };
        }
      } else if (op === 0x55) {
        frame.writes[slot] = (frame.writes[slot] || 0) + 1;
      } else if (op === 0x5c) {
        frame.tReads[slot] = (frame.tReads[slot] || 0) + 1;
      } else {
        frame.tWrites[slot] = (frame.tWrites[slot] || 0) + 1;
      }
    } else if (op === 0x20) {
      this.keccak[this.memory(log, stack.peek(0), stack.peek(1))] = true;
    } else if (op >= 0xa0 && op <= 0xa4 && this.withLog) {
      var topics = [];
      for (var t = 0; t < op - 0xa0; t++) topics.push(this.word(stack.peek(2 + t)));
      frame.logs.push({
        address: toHex(log.contract.getAddress()),
        topics: topics,
        data: this.memory(log, stack.peek(0), stack.peek(1)),
        index: this.hex(this.logIndex++),
        position: this.hex(frame.calls.length),
      });
    }
    this.lastOp = op;
    this.lastExt = this.isExt(op) ? this.addr(stack.peek(0)) : null;
  },

  settleRead: function (db, stack) {
    var read = this.pendingRead;
    this.pendingRead = null;
    read.frame.reads[read.slot][0] = stack !== null && this.frames.length === read.depth
      ? this.word(stack.peek(0))
      : toHex(db.getState(read.owner, read.slot)); // the SLOAD failed
  },

  enter: function (call) {
    var parent = this.frames[this.frames.length - 1];
    var type = call.getType();
    var frame = this.newFrame(type);
    frame.from = toHex(call.getFrom());
    frame.to = toHex(call.getTo());
    frame.input = toHex(call.getInput());
    frame.gas = call.getGas();
    if (type === "DELEGATECALL") frame.value = parent.value;
    else if (type !== "STATICCALL") frame.value = this.hex(BigInt(call.getValue()));
    frame.logBase = this.logIndex;
    this.frames.push(frame);
  },

  exit: function (result) {
    var frame = this.frames.pop();
    var parent = this.frames[this.frames.length - 1];
    var error = result.getError();
    frame.gasUsed = result.getGasUsed();
    if (error === undefined && frame.steps > 0 && !this.terminal(frame.last)) error = "out of gas";
    this.finish(frame, error, toHex(result.getOutput()));
    parent.calls.push(frame);
  },

  terminal: function (op) {
    return op === 0x00 || op === 0xf3 || op === 0xfd || op === 0xff;
  },

  gethError: function (error, frame) {
    var text = String(error);
    if (text.indexOf("OutOfGas") !== -1 || text === "out of gas") return "out of gas";
    var words = {
      StackUnderflow: "stack underflow",
      StackOverflow: "stack overflow",
      StateChangeDuringStaticCall: "write protection",
      CallTooDeep: "max call depth exceeded",
      OutOfFunds: "insufficient balance for transfer",
      CreateCollision: "contract address collision",
      CreateContractSizeLimit: "max code size exceeded",
      CreateInitCodeSizeLimit: "max initcode size exceeded",
      CreateContractStartingWithEF: "invalid code: must not begin with 0xef",
      OutOfOffset: "return data out of bounds",
      NonceOverflow: "nonce uint64 overflow",
    };
    if (words[text] !== undefined) return words[text];
    if (text === "invalid opcode") return "invalid opcode: opcode " + this.hex(frame.last) + " not defined";
    return text;
  },

  finish: function (frame, error, output) {
    if (error === undefined || error === null || error === "") {
      frame.output = output;
      return;
    }
    frame.error = this.gethError(error, frame);
    frame.oog = frame.error === "out of gas" ||
      frame.error === "contract creation code storage out of gas";
    this.logIndex = frame.logBase; // the failed frame's logs are undone
    if (frame.type === "CREATE" || frame.type === "CREATE2") frame.to = null;
    if (frame.error === "insufficient balance for transfer" ||
        frame.error === "max call depth exceeded") {
      return; // refused before it ran: geth gives the gas back
    }
    if (frame.error !== "execution reverted") {
      frame.gasUsed = frame.gas; // a halted frame keeps none of its gas
      return;
    }
    frame.output = output;
  },

  revertReason: function (output) {
    // Error(string) or Panic(uint256), as geth's abi.UnpackRevert reads them.
    var data = output.substring(2);
    if (data.substring(0, 8) === "08c379a0" && data.length >= 8 + 128) {
      var offset = parseInt(data.substring(8, 72), 16);
      var at = 8 + 2 * offset;
      var size = parseInt(data.substring(at, at + 64), 16);
      var bytes = data.substring(at + 64, at + 64 + 2 * size);
      if (bytes.length !== 2 * size) return "";
      var text = "";
      for (var i = 0; i < bytes.length; i += 2) text += "%" + bytes.substring(i, i + 2);
      try { return decodeURIComponent(text); } catch (e) { return ""; }
    }
    if (data.substring(0, 8) === "4e487b71" && data.length >= 8 + 64) {
      var code = BigInt("0x" + data.substring(8, 72));
      var reasons = {
        "0": "generic panic", "1": "assert(false)", "17": "arithmetic underflow or overflow",
        "18": "division or modulo by zero", "33": "enum overflow",
        "34": "invalid encoded storage byte array accessed",
        "49": "out-of-bounds array access; popping on an empty array",
        "50": "out-of-bounds access of an array or bytesN", "65": "out of memory",
        "81": "uninitialized function",
      };
      var known = reasons[code.toString()];
      return known !== undefined ? known : "unknown panic code: 0x" + code.toString(16);
    }
    return "";
  },

  sorted: function (map, value) {
    var keys = Object.keys(map).sort();
    var out = {};
    for (var i = 0; i < keys.length; i++) out[keys[i]] = value ? value(map[keys[i]]) : map[keys[i]];
    return out;
  },

  encode: function (frame, failedAbove) {
    // Keys in the order geth's encoder writes them; map keys sorted, as Go sorts them.
    var failed = failedAbove || frame.error !== "";
    var out = { from: frame.from, gas: this.hex(frame.gas), gasUsed: this.hex(frame.gasUsed) };
    if (frame.to !== null) out.to = frame.to;
    out.input = frame.input;
    if (frame.output !== "0x") out.output = frame.output;
    if (frame.error !== "") out.error = frame.error;
    if (frame.error === "execution reverted" && frame.output.length >= 10) {
      var reason = this.revertReason(frame.output);
      if (reason !== "") out.revertReason = reason;
    }
    if (!failed && frame.logs.length > 0) out.logs = frame.logs;
    if (frame.value !== null) out.value = frame.value;
    out.accessedSlots = {
      reads: this.sorted(frame.reads),
      writes: this.sorted(frame.writes),
      transientReads: this.sorted(frame.tReads),
      transientWrites: this.sorted(frame.tWrites),
    };
    out.extCodeAccessInfo = frame.ext;
    var used = {};
    for (var op in frame.used) used[this.hex(Number(op))] = frame.used[op];
    out.usedOpcodes = this.sorted(used);
    out.contractSize = this.sorted(frame.sizes);
    out.outOfGas = frame.oog;
    if (frame.keccak !== undefined && frame.keccak.length > 0) out.keccak = frame.keccak;
    if (frame.calls.length > 0) {
      out.calls = [];
      for (var i = 0; i < frame.calls.length; i++) out.calls.push(this.encode(frame.calls[i], failed));
    }
    out.type = frame.type;
    return out;
  },

  fault: function (log, db) {},

  result: function (ctx, db) {
    if (this.pendingRead !== null) this.settleRead(db, null);
    if (this.frames.length === 0) this.frames.push(this.newFrame("CALL"));
    var root = this.frames[0];
    root.type = ctx.type;
    root.from = toHex(ctx.from);
    root.to = ctx.to === undefined ? null : toHex(ctx.to);
    root.input = toHex(ctx.input);
    root.gas = ctx.gas;
    root.gasUsed = ctx.gasUsed;
    root.value = this.hex(BigInt(ctx.value === undefined ? 0 : ctx.value));
    var error;
    if (root.steps > 0 && root.last === 0xfd) error = "execution reverted";
    else if (root.steps > 0 && !this.terminal(root.last)) error = ctx.error || "out of gas";
    var output = root.last === 0xf3 || root.last === 0xfd ? this.rootOutput : "0x";
    this.finish(root, error, output);
    root.oog = false; // geth sets outOfGas on inner frames only
    root.gasUsed = ctx.gasUsed;
    root.keccak = Object.keys(this.keccak).sort();
    return this.encode(root, false);
  },
}
