#!/usr/bin/env node
// A stand-in for the native `solc` command line, for tools (py-solc-x, used by the ERC-4337
// bundler conformance suite) that want a native binary where only npm `solc` (solcjs) is at
// hand. It answers the part of solc's command line those tools use and compiles through npm
// solc's standard-JSON interface; docs/conformance.md describes its contract.
//
// Usage:
//   node tools/solc-standin.mjs [--solcjs DIR] [solc options] [remappings] (FILE... | -)
//   node tools/solc-standin.mjs [--solcjs DIR] --version | --help
//   node tools/solc-standin.mjs [--solcjs DIR] --write-launcher DIR
// --solcjs names the npm solc package to compile with (default: this repository's node_modules/solc).
// --write-launcher writes DIR/solc-v<version>, an executable that runs this stand-in with that
// package: the name and place py-solc-x looks for.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const thisFile = new URL(import.meta.url).pathname;

// Outputs of `--combined-json` and where each sits in a standard-JSON contract output.
const combinedOutputs = {
  abi: { select: "abi", read: (c) => c.abi },
  bin: { select: "evm.bytecode.object", read: (c) => c.evm.bytecode.object },
  "bin-runtime": { select: "evm.deployedBytecode.object", read: (c) => c.evm.deployedBytecode.object },
  devdoc: { select: "devdoc", read: (c) => c.devdoc },
  hashes: { select: "evm.methodIdentifiers", read: (c) => c.evm.methodIdentifiers },
  metadata: { select: "metadata", read: (c) => c.metadata },
  opcodes: { select: "evm.bytecode.opcodes", read: (c) => c.evm.bytecode.opcodes },
  srcmap: { select: "evm.bytecode.sourceMap", read: (c) => c.evm.bytecode.sourceMap },
  "srcmap-runtime": { select: "evm.deployedBytecode.sourceMap", read: (c) => c.evm.deployedBytecode.sourceMap },
  "storage-layout": { select: "storageLayout", read: (c) => c.storageLayout },
  userdoc: { select: "userdoc", read: (c) => c.userdoc },
};

class UsageError extends Error {}

// Options that take a value, as solc spells them (`--opt value` or `--opt=value`).
const valued = new Set([
  "--solcjs", "--write-launcher", "--combined-json", "--base-path", "--include-path", "--allow-paths",
  "--evm-version", "--optimize-runs",
]);
const flags = new Set(["--version", "--help", "--optimize", "--via-ir"]);

export function parseArguments(argv) {
  const options = { includePaths: [], allowPaths: [], remappings: [], files: [], stdin: false, optimizeRuns: 200 };
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    let value;
    const eq = arg.startsWith("--") ? arg.indexOf("=") : -1;
    if (eq > 0 && valued.has(arg.slice(0, eq))) [arg, value] = [arg.slice(0, eq), arg.slice(eq + 1)];
    if (valued.has(arg)) {
      if (value === undefined) {
        if (i + 1 >= argv.length) throw new UsageError(`${arg} needs a value`);
        value = argv[++i];
      }
      switch (arg) {
        case "--solcjs": options.solcjs = value; break;
        case "--write-launcher": options.writeLauncher = value; break;
        case "--combined-json": options.combined = value.split(",").filter(Boolean); break;
        case "--base-path": options.basePath = value; break;
        case "--include-path": options.includePaths.push(value); break;
        case "--allow-paths": options.allowPaths.push(...value.split(",").filter(Boolean)); break;
        case "--evm-version": options.evmVersion = value; break;
        case "--optimize-runs":
          if (!/^\d+$/.test(value)) throw new UsageError(`--optimize-runs wants a whole number, not ${value}`);
          options.optimizeRuns = Number(value);
          break;
      }
    } else if (flags.has(arg)) {
      options[{ "--version": "version", "--help": "help", "--optimize": "optimize", "--via-ir": "viaIR" }[arg]] = true;
    } else if (arg === "-") {
      options.stdin = true;
    } else if (arg.startsWith("-")) {
      throw new UsageError(`unsupported option ${arg} (see docs/conformance.md for what this stand-in answers)`);
    } else if (arg.includes("=")) {
      options.remappings.push(arg);
    } else {
      options.files.push(arg);
    }
  }
  for (const key of options.combined ?? []) {
    if (!(key in combinedOutputs)) throw new UsageError(`unsupported --combined-json output ${key}`);
  }
  return options;
}

function loadSolcjs(dir) {
  return dir ? createRequire(path.join(path.resolve(dir), "package.json"))("./index.js") : require("solc");
}

// solc's own lookup: a source unit name is read under the base path (the working directory when
// none is given), then under each include path in order; an absolute name is read as it is.
export function importReader(basePath, includePaths) {
  const roots = [basePath ?? "", ...includePaths];
  return (unitName) => {
    const candidates = path.isAbsolute(unitName) ? [unitName] : roots.map((root) => path.resolve(root, unitName));
    for (const candidate of candidates) {
      if (fs.existsSync(candidate) && fs.statSync(candidate).isFile()) {
        return { contents: fs.readFileSync(candidate, "utf8") };
      }
    }
    return { error: `File not found. Searched the base path and the include paths for ${unitName}` };
  };
}

// The source unit name solc gives a file named on the command line: its path relative to the
// base path (or to an include path) when it lies inside one, else the path as given.
function unitNameOf(file, basePath, includePaths) {
  const absolute = path.resolve(file);
  for (const root of [basePath ?? ".", ...includePaths]) {
    const relative = path.relative(path.resolve(root), absolute);
    if (relative && !relative.startsWith("..") && !path.isAbsolute(relative)) return relative.split(path.sep).join("/");
  }
  return file;
}

export function standardInput(options, stdinText) {
  const sources = {};
  if (options.stdin) sources["<stdin>"] = { content: stdinText };
  for (const file of options.files) {
    sources[unitNameOf(file, options.basePath, options.includePaths)] = { content: fs.readFileSync(file, "utf8") };
  }
  const selected = options.combined.map((key) => combinedOutputs[key].select);
  const settings = {
    optimizer: { enabled: Boolean(options.optimize), runs: options.optimizeRuns },
    outputSelection: { "*": { "*": selected } },
  };
  if (options.evmVersion) settings.evmVersion = options.evmVersion;
  if (options.viaIR) settings.viaIR = true;
  if (options.remappings.length) settings.remappings = options.remappings;
  return { language: "Solidity", sources, settings };
}

// The `--combined-json` document solc prints: one entry per contract of every source unit
// (imports included), keyed "<unit>:<contract>", with only the outputs asked for.
export function combinedJson(output, keys, version) {
  const contracts = {};
  for (const [unit, byName] of Object.entries(output.contracts ?? {})) {
    for (const [name, contract] of Object.entries(byName)) {
      contracts[`${unit}:${name}`] = Object.fromEntries(keys.map((key) => [key, combinedOutputs[key].read(contract)]));
    }
  }
  return { contracts, version };
}

function writeLauncher(dir, solcjsDir, solc) {
  const version = solc.version().match(/^\d+\.\d+\.\d+/)[0];
  const launcher = path.join(dir, `solc-v${version}`);
  const solcjsArgument = solcjsDir ? ` --solcjs '${path.resolve(solcjsDir)}'` : "";
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(launcher, `#!/bin/sh\nexec node '${thisFile}'${solcjsArgument} "$@"\n`, { mode: 0o755 });
  process.stdout.write(`${launcher}\n`);
}

const help = (version) => `solc, the solidity compiler commandline interface (stand-in over npm solc ${version})
Usage: solc [options] [remapping=target ...] (FILE ... | -)
  --version
  --help
  --base-path path
  --include-path path
  --allow-paths path(s)
  --evm-version version
  --optimize
  --optimize-runs n
  --via-ir
  --combined-json ${Object.keys(combinedOutputs).join(",")}
`;

function main(argv) {
  const options = parseArguments(argv);
  const solc = loadSolcjs(options.solcjs);
  if (options.writeLauncher) return writeLauncher(options.writeLauncher, options.solcjs, solc);
  if (options.help) return process.stdout.write(help(solc.version()));
  if (options.version) {
    return process.stdout.write(`solc, the solidity compiler commandline interface\nVersion: ${solc.version()}\n`);
  }
  if (!options.combined) throw new UsageError("give --combined-json: it is the only output this stand-in writes");
  if (!options.stdin && options.files.length === 0) throw new UsageError("no input files given (name files, or - for stdin)");
  const input = standardInput(options, options.stdin ? fs.readFileSync(0, "utf8") : "");
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: importReader(options.basePath, options.includePaths) }));
  const diagnostics = output.errors ?? [];
  for (const diagnostic of diagnostics) process.stderr.write(`${diagnostic.formattedMessage}\n`);
  if (diagnostics.some((d) => d.severity === "error")) return (process.exitCode = 1);
  process.stdout.write(`${JSON.stringify(combinedJson(output, options.combined, solc.version()))}\n`);
}

if (process.argv[1] && fs.realpathSync(process.argv[1]) === fs.realpathSync(thisFile)) {
  try {
    main(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`solc stand-in: ${error.message}\n`);
    process.exitCode = 1;
  }
}
