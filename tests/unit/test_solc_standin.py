"""tools/solc-standin.mjs: solc's command line as py-solc-x drives it, over npm solc.

Every compilation is checked against npm solc's own standard-JSON output for the same
sources and settings, so a stand-in that resolves an import from the wrong place, drops a
setting or mislabels an output fails here.
"""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "tools" / "solc-standin.mjs"
SOLCJS = ROOT / "node_modules" / "solc"

# Node compiling a standard-JSON input (stdin) with npm solc, every source given.
REFERENCE = (
    "const solc = require(process.argv[1]);"
    " process.stdout.write(solc.compile(require('fs').readFileSync(0, 'utf8')));"
)

MAIN = """// SPDX-License-Identifier: MIT
pragma solidity ^0.8.0;
import "lib/Counter.sol";
import "@shapes/Square.sol";
contract Main is Counter {
    function area(uint256 side) external pure returns (uint256) { return Square.area(side); }
}
"""
COUNTER = """// SPDX-License-Identifier: MIT
pragma solidity ^0.8.0;
contract Counter {
    uint256 public count;
    function increment() external { count += 1; }
}
"""
SQUARE = """// SPDX-License-Identifier: MIT
pragma solidity ^0.8.0;
library Square {
    function area(uint256 side) internal pure returns (uint256) { return side * side; }
}
"""


def standin(*args: str, stdin: str = "", cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["node", str(STANDIN), *args], input=stdin, capture_output=True, text=True, cwd=cwd
    )


def reference(sources: dict[str, str], settings: dict[str, object]) -> dict[str, object]:
    selection = ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"]
    document = {
        "language": "Solidity",
        "sources": {name: {"content": text} for name, text in sources.items()},
        "settings": settings | {"outputSelection": {"*": {"*": selection}}},
    }
    run = subprocess.run(
        ["node", "-e", REFERENCE, str(SOLCJS)],
        input=json.dumps(document),
        capture_output=True,
        text=True,
        check=True,
    )
    output: dict[str, object] = json.loads(run.stdout)
    return output


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """Main.sol under the base path; Counter.sol only under an include path; Square.sol
    under a directory reached through a remapping."""
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "Main.sol").write_text(MAIN)
    (tmp_path / "include" / "lib").mkdir(parents=True)
    (tmp_path / "include" / "lib" / "Counter.sol").write_text(COUNTER)
    (tmp_path / "shapes").mkdir()
    (tmp_path / "shapes" / "Square.sol").write_text(SQUARE)
    return tmp_path


def compile_main(project: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return standin(
        "--combined-json",
        "abi,bin,bin-runtime",
        "-",
        "--base-path",
        str(project / "base"),
        "--include-path",
        str(project / "include"),
        "--allow-paths",
        str(project / "shapes"),
        "@shapes=../shapes",
        *extra,
        stdin=MAIN,
    )


def test_stdin_source_with_an_include_path_import_matches_npm_solc(project: Path) -> None:
    run = compile_main(project, "--evm-version", "cancun", "--optimize", "--optimize-runs", "1")
    assert run.returncode == 0, run.stderr
    contracts = json.loads(run.stdout)["contracts"]
    assert set(contracts) == {
        "<stdin>:Main",
        "lib/Counter.sol:Counter",
        "../shapes/Square.sol:Square",
    }

    expected = reference(
        {"<stdin>": MAIN, "lib/Counter.sol": COUNTER, "../shapes/Square.sol": SQUARE},
        {
            "optimizer": {"enabled": True, "runs": 1},
            "evmVersion": "cancun",
            "remappings": ["@shapes=../shapes"],
        },
    )
    main = expected["contracts"]["<stdin>"]["Main"]  # type: ignore[index]
    assert contracts["<stdin>:Main"] == {
        "abi": main["abi"],
        "bin": main["evm"]["bytecode"]["object"],
        "bin-runtime": main["evm"]["deployedBytecode"]["object"],
    }
    assert {entry["name"] for entry in contracts["<stdin>:Main"]["abi"]} == {
        "area",
        "count",
        "increment",
    }


def test_settings_reach_the_compiler(project: Path) -> None:
    """--optimize-runs, --evm-version and --via-ir each change the code, as in npm solc."""
    plain = json.loads(compile_main(project, "--optimize").stdout)["contracts"]["<stdin>:Main"]
    runs = json.loads(compile_main(project, "--optimize", "--optimize-runs=1000000").stdout)
    paris = json.loads(compile_main(project, "--optimize", "--evm-version=paris").stdout)
    via_ir = compile_main(project, "--optimize", "--via-ir")
    assert via_ir.returncode == 0, via_ir.stderr
    ir_main = json.loads(via_ir.stdout)["contracts"]["<stdin>:Main"]
    bins = {plain["bin"], runs["contracts"]["<stdin>:Main"]["bin"]}
    bins |= {paris["contracts"]["<stdin>:Main"]["bin"], ir_main["bin"]}
    assert len(bins) == 4

    expected = reference(
        {"<stdin>": MAIN, "lib/Counter.sol": COUNTER, "../shapes/Square.sol": SQUARE},
        {
            "optimizer": {"enabled": True, "runs": 200},
            "viaIR": True,
            "remappings": ["@shapes=../shapes"],
        },
    )
    main = expected["contracts"]["<stdin>"]["Main"]  # type: ignore[index]
    assert ir_main["bin"] == main["evm"]["bytecode"]["object"]


def test_base_path_is_searched_before_include_paths(project: Path) -> None:
    shadow = COUNTER.replace(
        "function increment()", "function reset() external { count = 0; }\n    function increment()"
    )
    (project / "base" / "lib").mkdir()
    (project / "base" / "lib" / "Counter.sol").write_text(shadow)
    run = compile_main(project)
    assert run.returncode == 0, run.stderr
    abi = json.loads(run.stdout)["contracts"]["<stdin>:Main"]["abi"]
    assert "reset" in {entry["name"] for entry in abi}


def test_files_named_on_the_command_line_are_units_relative_to_the_base_path(project: Path) -> None:
    run = standin(
        "--combined-json",
        "abi,bin",
        "--base-path",
        ".",
        "--include-path",
        "include",
        "@shapes=shapes",
        "base/Main.sol",
        cwd=project,
    )
    assert run.returncode == 0, run.stderr
    assert "base/Main.sol:Main" in json.loads(run.stdout)["contracts"]


def test_a_missing_import_fails_with_solcs_error(project: Path) -> None:
    (project / "include" / "lib" / "Counter.sol").unlink()
    run = compile_main(project)
    assert run.returncode == 1
    assert run.stdout == ""
    assert "lib/Counter.sol" in run.stderr and "not found" in run.stderr


def test_unsupported_options_are_refused_by_name() -> None:
    run = standin("--combined-json", "abi", "--stop-after", "parsing", "-", stdin=MAIN)
    assert run.returncode == 1
    assert "unsupported option --stop-after" in run.stderr
    run = standin("--combined-json", "abi,asm", "-", stdin=MAIN)
    assert run.returncode == 1
    assert "unsupported --combined-json output asm" in run.stderr


def test_version_and_help_read_as_py_solc_x_expects() -> None:
    package = json.loads((SOLCJS / "package.json").read_text())
    version = standin("--version")
    assert version.returncode == 0
    # py-solc-x's pattern for the version line.
    match = re.search(r"(\d+\.\d+\.\d+)(?:-nightly.\d+.\d+.\d+|)(\+commit.\w+)", version.stdout)
    assert match is not None and match.group(1) == package["version"]
    help_lines = standin("--help", "-").stdout.split("\n")
    combined = next(line for line in help_lines if line.startswith("  --combined-json"))
    assert {"abi", "bin", "bin-runtime"} <= set(combined.split(" ")[-1].split(","))


def test_written_launcher_is_named_for_the_version_and_runs_the_standin(tmp_path: Path) -> None:
    package = json.loads((SOLCJS / "package.json").read_text())
    run = standin("--solcjs", str(SOLCJS), "--write-launcher", str(tmp_path / "solcx"))
    assert run.returncode == 0, run.stderr
    launcher = tmp_path / "solcx" / f"solc-v{package['version']}"
    assert run.stdout.strip() == str(launcher)
    assert os.access(launcher, os.X_OK)
    answer = subprocess.run(
        [str(launcher), "--version"], capture_output=True, text=True, check=True
    )
    assert f"Version: {package['version']}+commit." in answer.stdout
