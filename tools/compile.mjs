// Compiles contracts/ with the pinned solc (npm `solc`, solcjs) through its standard-JSON
// interface and writes one artifact per contract: ABI, creation and runtime bytecode.
// Usage: node tools/compile.mjs OUT_DIR
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const solc = require("solc");

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
const outDir = path.resolve(process.argv[2] ?? path.join(root, "src/entryway/contracts/artifacts"));

// Which contracts become artifacts (source path -> contract names).
const targets = {
  "contracts/SmartAccount.sol": ["SmartAccount"],
  "contracts/AccountFactory.sol": ["AccountFactory"],
  "contracts/VerifyingPaymaster.sol": ["VerifyingPaymaster"],
  "contracts/NotaryAnchor.sol": ["NotaryAnchor"],
  "contracts/EntrywaySimulations.sol": ["EntrywaySimulations"],
  "contracts/devnet/DevnetGasPriceOracle.sol": ["DevnetGasPriceOracle"],
  "contracts/devnet/DevnetPriceFeed.sol": ["DevnetPriceFeed"],
  "contracts/test/TestCounter.sol": ["TestCounter"],
  "contracts/test/TestGasPriceOracle.sol": ["TestGasPriceOracle"],
  "contracts/test/TestRules.sol": ["TestStorage", "RuleHelper", "TestRulesAccount", "TestRulesPaymaster", "TestRulesFactory"],
};

export const settings = {
  optimizer: { enabled: true, runs: 10000 },
  evmVersion: "cancun",
  outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object", "evm.deployedBytecode.immutableReferences"] } },
};

const sources = {};
for (const file of Object.keys(targets)) {
  sources[file] = { content: fs.readFileSync(path.join(root, file), "utf8") };
}

function findImports(importPath) {
  const candidates = [path.join(root, importPath), path.join(root, "node_modules", importPath)];
  for (const candidate of candidates) {
    if (fs.existsSync(candidate)) return { contents: fs.readFileSync(candidate, "utf8") };
  }
  return { error: `not found: ${importPath}` };
}

// Sources compiled a second time against the EntryPoint v0.7 release (its npm alias), for the
// v0.7 EntryPoint: the artifacts get a "V07" suffix.
const v07Targets = {
  "contracts/EntrywaySimulations.sol": ["EntrywaySimulations"],
};
const v07Remapping = "@account-abstraction/contracts/=@account-abstraction/contracts-v07/";
// And against EntryPoint v0.9 (npm has only its release candidate), suffixed "V09".
const v09Remapping = "@account-abstraction/contracts/=@account-abstraction/contracts-v09/";

function compile(targetFiles, remappings) {
  const input = {};
  for (const file of Object.keys(targetFiles)) input[file] = sources[file] ?? { content: fs.readFileSync(path.join(root, file), "utf8") };
  const out = JSON.parse(
    solc.compile(JSON.stringify({ language: "Solidity", sources: input, settings: remappings.length ? { ...settings, remappings } : settings }), {
      import: findImports,
    }),
  );
  // Warnings from the audited dependencies (e.g. their use of transient storage) are theirs.
  for (const e of out.errors ?? []) {
    if (e.severity === "error" || (e.sourceLocation?.file ?? "").startsWith("contracts/")) {
      process.stderr.write(e.formattedMessage + "\n");
    }
  }
  if ((out.errors ?? []).some((e) => e.severity === "error")) process.exit(1);
  return out;
}

function writeArtifacts(output, targetFiles, suffix) {
  for (const [file, names] of Object.entries(targetFiles)) {
    for (const name of names) {
      const c = output.contracts[file][name];
      const artifact = {
        contractName: name,
        sourceName: file,
        compiler: { version: solc.version(), settings: { optimizer: settings.optimizer, evmVersion: settings.evmVersion } },
        abi: c.abi,
        bytecode: "0x" + c.evm.bytecode.object,
        deployedBytecode: "0x" + c.evm.deployedBytecode.object,
        immutableReferences: c.evm.deployedBytecode.immutableReferences ?? {},
      };
      fs.writeFileSync(path.join(outDir, `${name}${suffix}.json`), JSON.stringify(artifact, null, 1) + "\n");
    }
  }
}

fs.mkdirSync(outDir, { recursive: true });
writeArtifacts(compile(targets, []), targets, "");
// The v0.7 paymaster compiles on its own: its v0.7 interface sources in the compilation above
// would renumber the AST ids that key every other artifact's immutableReferences.
const paymasterV07 = { "contracts/VerifyingPaymasterV07.sol": ["VerifyingPaymasterV07"] };
writeArtifacts(compile(paymasterV07, []), paymasterV07, "");
writeArtifacts(compile(v07Targets, [v07Remapping]), v07Targets, "V07");
const compiledV07 = Object.values(v07Targets).flat().map((n) => `${n}V07`);
// v0.6's paymaster too: it builds on that release's interfaces (the unpacked UserOperation).
const paymasterV06 = { "contracts/VerifyingPaymasterV06.sol": ["VerifyingPaymasterV06"] };
writeArtifacts(compile(paymasterV06, []), paymasterV06, "");
const paymasterV09 = { "contracts/VerifyingPaymasterV09.sol": ["VerifyingPaymasterV09"] };
writeArtifacts(compile(paymasterV09, []), paymasterV09, "");
writeArtifacts(compile(v07Targets, [v09Remapping]), v07Targets, "V09");
const compiledV09 = ["VerifyingPaymasterV09", ...Object.values(v07Targets).flat().map((n) => `${n}V09`)];

// The audited EntryPoint releases (v0.8, and v0.7, v0.9's release candidate and v0.6 through
// their npm aliases) and their reference accounts are used as published, not recompiled: their
// artifacts are copied so the service can deploy without node_modules. v0.7's get a "V07"
// suffix (EntryPointV07.json and so on), v0.9's "V09", v0.6's "V06".
const releases = [
  {
    dir: "node_modules/@account-abstraction/contracts",
    suffix: "",
    names: ["EntryPoint", "EntryPointSimulations", "SimpleAccount", "SimpleAccountFactory", "Simple7702Account"],
  },
  {
    dir: "node_modules/@account-abstraction/contracts-v07",
    suffix: "V07",
    names: ["EntryPoint", "EntryPointSimulations", "SimpleAccount", "SimpleAccountFactory"],
  },
  {
    // v0.6 simulates inside the EntryPoint itself: it has no EntryPointSimulations.
    dir: "node_modules/@account-abstraction/contracts-v06",
    suffix: "V06",
    names: ["EntryPoint", "SimpleAccount", "SimpleAccountFactory"],
  },
  {
    dir: "node_modules/@account-abstraction/contracts-v09",
    suffix: "V09",
    names: ["EntryPoint", "EntryPointSimulations", "SimpleAccount", "SimpleAccountFactory"],
  },
];
const vendored = [];
for (const release of releases) {
  const aaPackage = JSON.parse(fs.readFileSync(path.join(root, release.dir, "package.json"), "utf8"));
  for (const name of release.names) {
    const src = JSON.parse(fs.readFileSync(path.join(root, release.dir, "artifacts", `${name}.json`), "utf8"));
    const artifact = {
      contractName: name,
      sourceName: src.sourceName,
      package: `${aaPackage.name}@${aaPackage.version}`,
      abi: src.abi,
      bytecode: src.bytecode,
      deployedBytecode: src.deployedBytecode,
      immutableReferences: {},
    };
    const file = `${name}${release.suffix}`;
    fs.writeFileSync(path.join(outDir, `${file}.json`), JSON.stringify(artifact, null, 1) + "\n");
    vendored.push(file);
  }
}

process.stdout.write(`compiled ${[...Object.values(targets).flat(), "VerifyingPaymasterV07", "VerifyingPaymasterV06", ...compiledV07, ...compiledV09].join(", ")} -> ${path.relative(root, outDir)}; copied ${vendored.join(", ")}\n`);
