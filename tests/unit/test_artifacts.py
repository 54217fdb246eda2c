"""The artifacts inside the package are exactly what the pinned toolchain produces."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from entryway import contracts
from entryway.contracts import (
    ENTRYWAY_CONTRACTS,
    SIMULATION_CONTRACTS,
    TEST_CONTRACTS,
    VENDORED_CONTRACTS,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGED = ROOT / "src" / "entryway" / "contracts" / "artifacts"


def test_committed_artifacts_equal_a_fresh_compile(tmp_path: Path) -> None:
    subprocess.run(
        ["node", "tools/compile.mjs", str(tmp_path)], cwd=ROOT, check=True, capture_output=True
    )
    fresh = sorted(p.name for p in tmp_path.glob("*.json"))
    assert fresh == sorted(p.name for p in PACKAGED.glob("*.json"))
    for name in fresh:
        assert json.loads((tmp_path / name).read_text()) == json.loads(
            (PACKAGED / name).read_text()
        ), f"{name} is stale: run `make contracts`"


def _release_suffix(name: str) -> str:
    return name[-3:] if name.endswith(("V06", "V07", "V09")) else ""


def test_vendored_entry_points_are_the_npm_releases() -> None:
    packages = {
        "": ("contracts", "0.8.0", 4),
        "V07": ("contracts-v07", "0.7.0", 4),
        "V09": ("contracts-v09", "0.9.0-rc.1", 4),
        "V06": ("contracts-v06", "0.6.0", 3),  # v0.6 simulates in the EntryPoint itself
    }
    for suffix, (package, version, count) in packages.items():
        npm = ROOT / "node_modules" / "@account-abstraction" / package
        assert json.loads((npm / "package.json").read_text())["version"] == version
        names = [n for n in VENDORED_CONTRACTS if _release_suffix(n) == suffix]
        assert len(names) == count, suffix
        for name in names:
            published = json.loads(
                (npm / "artifacts" / f"{name.removesuffix(suffix)}.json").read_text()
            )
            ours = contracts.load(name)
            assert ours.bytecode.hex() == published["bytecode"].removeprefix("0x")
            assert ours.deployed_bytecode.hex() == published["deployedBytecode"].removeprefix("0x")


def test_every_artifact_loads_with_code() -> None:
    for name in ENTRYWAY_CONTRACTS + VENDORED_CONTRACTS + SIMULATION_CONTRACTS + TEST_CONTRACTS:
        artifact = contracts.load(name)
        assert artifact.bytecode and artifact.deployed_bytecode, name
    factory = contracts.load("AccountFactory")
    assert factory.immutable_ranges(), "the factory's immutables must be known"
