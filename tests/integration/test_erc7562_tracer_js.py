"""The JavaScript stand-in for geth's erc7562Tracer (tests/node_kinds/erc7562_tracer.js) writes
geth's format on real anvil: on hand-assembled contracts, each thing geth records is checked
as geth's tracer records it, and the call frames agree with anvil's own callTracer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from entryway.chain.rpc import EthClient

TRACER = (Path(__file__).parents[1] / "node_kinds" / "erc7562_tracer.js").read_text()
CALLER = "0x00000000000000000000000000000000000000f0"
MAIN, PEEK, LIB, LOOP, MAKER, SILENT = (f"0x{n:02x}" + "ab" * 19 for n in range(1, 7))
_OPS = {
    "POP": 0x50, "MSTORE": 0x52, "SLOAD": 0x54, "SSTORE": 0x55, "JUMP": 0x56, "GAS": 0x5A,
    "JUMPDEST": 0x5B, "TLOAD": 0x5C, "ISZERO": 0x15, "KECCAK256": 0x20, "EXTCODESIZE": 0x3B,
    "EXTCODEHASH": 0x3F, "LOG1": 0xA1, "CREATE2": 0xF5, "CALL": 0xF1, "RETURN": 0xF3,
    "DELEGATECALL": 0xF4, "STATICCALL": 0xFA, "REVERT": 0xFD, "STOP": 0x00, "TIMESTAMP": 0x42,
}  # fmt: skip


def asm(*items: int | str) -> bytes:
    """Bytecode from opcode names and numbers (each number pushed in as few bytes as fit)."""
    code = bytearray()
    for item in items:
        if isinstance(item, str) and item.startswith("0x"):
            item = int(item, 16)
        if isinstance(item, int):
            size = max(1, (item.bit_length() + 7) // 8)
            code += bytes([0x5F + size]) + item.to_bytes(size, "big")
        else:
            code.append(_OPS[item])
    return bytes(code)


def call(op: str, target: str, gas: int | None = None, value: int = 0) -> bytes:
    """A call with no arguments and no return area; GAS right before it when `gas` is None."""
    with_value = (value,) if op == "CALL" else ()
    head = asm(0, 0, 0, 0, *with_value, target)
    return head + (asm("GAS") if gas is None else asm(gas)) + asm(op, "POP")


ERROR_HI = bytes.fromhex("08c379a0") + (32).to_bytes(32, "big") + (2).to_bytes(32, "big")
ERROR_HI += b"hi".ljust(32, b"\0")
LOOP_INIT = asm("JUMPDEST", 0, "JUMP")
CODES = {
    MAIN: asm(7, 5, "SSTORE")  # the value LIB's SLOAD must see
    + asm("GAS", "POP")  # GAS with no call after it: counted
    + asm(PEEK, "EXTCODESIZE", "ISZERO", "POP")  # OP-051's check: not listed
    + asm(PEEK, "EXTCODEHASH", "POP")
    + call("DELEGATECALL", LIB)
    + call("STATICCALL", "0x04")  # a precompile: a frame with no code
    + call("CALL", LOOP, gas=5_000)  # runs out of gas
    + call("CALL", MAKER, gas=100_000)  # its CREATE2 runs out of gas
    + call("CALL", SILENT)  # reverts with Error("hi")
    + asm(0xABC, 0, "MSTORE", 0x77, 0x20, 0, "LOG1")
    + asm(0x20, 0x3E0, "KECCAK256", "POP")  # past memory's end: zeros
    + asm(0x11, 0, "MSTORE", 0x20, 0, "RETURN"),
    PEEK: asm("STOP"),
    LIB: asm(5, "SLOAD", "POP", 5, "SLOAD", "POP", 1, "TLOAD", "POP", 9, 6, "SSTORE", "STOP"),
    LOOP: asm("JUMPDEST", 0, "JUMP"),
    MAKER: asm(int.from_bytes(LOOP_INIT, "big"), 0, "MSTORE")
    + asm(8, len(LOOP_INIT), 32 - len(LOOP_INIT), 0, "CREATE2", "POP", "STOP"),
    SILENT: b"".join(
        asm(int.from_bytes(ERROR_HI[i : i + 32].ljust(32, b"\0"), "big"), i, "MSTORE")
        for i in range(0, len(ERROR_HI), 32)
    )
    + asm(len(ERROR_HI), 0, "REVERT"),
}


async def traced(eth: EthClient, tracer: str, config: dict[str, Any] | None = None) -> Any:
    options: dict[str, Any] = {
        "tracer": tracer,
        "stateOverrides": {a: {"code": "0x" + c.hex()} for a, c in CODES.items()},
    }
    if config is not None:
        options["tracerConfig"] = config
    call_object = {"from": CALLER, "to": MAIN, "data": "0x1234", "gas": hex(1_000_000)}
    return await eth.rpc.request("debug_traceCall", [call_object, "latest", options])


def word(n: int) -> str:
    return "0x" + n.to_bytes(32, "big").hex()


async def test_what_each_frame_did_is_recorded_as_geth_records_it(eth: EthClient) -> None:
    top = await traced(eth, TRACER, {"withLog": True})
    assert (top["type"], top["from"], top["to"], top["input"]) == ("CALL", CALLER, MAIN, "0x1234")
    assert top["gas"] == hex(1_000_000) and top["value"] == "0x0"
    assert top["output"] == word(0x11) and "error" not in top and top["outOfGas"] is False
    used = top["usedOpcodes"]
    assert used["0x5a"] == 1  # the GAS before POP; none of the five before a call
    assert "0x60" not in used and "0x50" not in used and "0x15" not in used  # ignored
    assert used["0x3b"] == used["0x3f"] == 1 and used["0xf1"] == 3 and used["0xa1"] == 1
    assert top["extCodeAccessInfo"] == [PEEK]  # the EXTCODEHASH; not EXTCODESIZE + ISZERO
    assert top["contractSize"][PEEK] == {"contractSize": 1, "opcode": 0x3B}
    assert top["contractSize"]["0x0000000000000000000000000000000000000004"] == {
        "contractSize": 0,
        "opcode": 0xFA,
    }
    assert top["accessedSlots"]["writes"] == {word(5): 1}
    assert top["keccak"] == ["0x" + "00" * 32]
    assert top["logs"] == [
        {"address": MAIN, "topics": [word(0x77)], "data": word(0xABC), "index": "0x0",
         "position": "0x5"}
    ]  # fmt: skip
    lib, precompile, loop, maker, silent = top["calls"]
    assert (lib["type"], lib["from"], lib["to"], lib["value"]) == ("DELEGATECALL", MAIN, LIB, "0x0")
    # Read once (the value written before, not the chain's), written once, by MAIN's storage.
    assert lib["accessedSlots"] == {
        "reads": {word(5): [word(7)]},
        "writes": {word(6): 1},
        "transientReads": {word(1): 1},
        "transientWrites": {},
    }
    assert precompile["type"] == "STATICCALL" and "value" not in precompile
    assert precompile["usedOpcodes"] == {} and precompile["outOfGas"] is False
    assert loop["error"] == "out of gas" and loop["outOfGas"] is True
    assert loop["gasUsed"] == loop["gas"] == hex(5_000)
    (create2,) = maker["calls"]
    assert create2["type"] == "CREATE2" and "to" not in create2  # geth drops a failed one's
    assert create2["error"] == "out of gas" and create2["outOfGas"] is True
    assert create2["input"] == "0x" + LOOP_INIT.hex()
    assert silent["error"] == "execution reverted" and silent["revertReason"] == "hi"
    assert silent["output"] == "0x" + ERROR_HI.hex() and silent["outOfGas"] is False


async def test_tracer_config_changes_what_geth_changes(eth: EthClient) -> None:
    plain = await traced(eth, TRACER)
    assert "logs" not in plain  # only withLog collects them
    everything = await traced(eth, TRACER, {"ignoredOpcodes": []})
    assert everything["usedOpcodes"]["0x60"] > 0 and everything["usedOpcodes"]["0x50"] > 0
    assert "0x5a" in everything["usedOpcodes"]  # GAS stays out of the ignore list's reach
    only_sload = await traced(eth, TRACER, {"ignoredOpcodes": ["0x54"]})
    assert "0x54" not in only_sload["calls"][0]["usedOpcodes"]
    assert only_sload["usedOpcodes"]["0x60"] > 0  # the list replaces the default


async def test_call_frames_agree_with_anvils_call_tracer(eth: EthClient) -> None:
    def skeleton(frame: dict[str, Any], top: bool = False) -> Any:
        keys = ["type", "from", "to", "input", "output", "error", "value", "gasUsed"]
        keys += [] if top else ["gas"]  # anvil's callTracer takes intrinsic gas off the top
        return (
            {k: frame.get(k) for k in keys},
            [skeleton(c) for c in frame.get("calls", [])],
        )

    ours = await traced(eth, TRACER)
    theirs = await traced(eth, "callTracer")
    assert skeleton(ours, top=True) == skeleton(theirs, top=True)
