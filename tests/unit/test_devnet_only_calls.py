"""Node methods only development nodes answer (`anvil_*`, `evm_*`, `hardhat_*`) are named
only in modules that run against a devnet, so no path a real chain takes sends one: a real
node refuses them, and the op or deployment behind the call would fail there. Checked on the
source: every such method name, as a string in the code, sits in a module of the allowlist
below; and the one allowlisted module outside `entryway.devnet` is imported only by callers
that reach it on a development node alone."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import entryway

ROOT = Path(entryway.__file__).parent
DEV_METHOD = re.compile(r"(anvil|evm|hardhat)_[A-Za-z]+")

# Module → why every dev-node call it makes is on a devnet-only path.
DEVNET_ONLY = {
    "entryway.devnet.devnet": "provisions the anvil nodes `entryway devnet` and `up` start",
    "entryway.devnet.predeploys": "places the devnet's L1 gas price oracle stand-in",
    "entryway.devnet.fee_layer": "the proxy in front of a devnet's anvil (names mining calls)",
    "entryway.deploy.entry_point_v06": "places EntryPoint v0.6 by copying code: callers below",
}
# Allowlisted modules outside the devnet package → the modules that may import them, and why.
GATED_CALLERS = {
    "entryway.deploy.entry_point_v06": {
        "entryway.devnet.devnet": "a devnet's own provisioning",
        "entryway.bundler.standalone": "only once web3_clientVersion names anvil",
    },
}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def dev_method_names(source: str) -> list[str]:
    """Every string constant in `source` that is a dev-node method name (docstrings, which
    may mention one in passing, are longer strings and never match whole)."""
    return [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and DEV_METHOD.fullmatch(node.value)
    ]


def importers(module: str) -> set[str]:
    """The modules of the package that import `module` or a name from it."""
    found = set()
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if module in names:
                found.add(_module(path))
    return found


def test_dev_node_methods_are_named_only_in_devnet_modules() -> None:
    named: dict[str, list[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        methods = dev_method_names(path.read_text(encoding="utf-8"))
        if methods:
            named[_module(path)] = methods
    outside = {module: methods for module, methods in named.items() if module not in DEVNET_ONLY}
    assert not outside, f"dev-node methods outside devnet-only modules: {outside}"
    # Each allowlist entry still names one, so a stale entry cannot hide a new module.
    assert set(named) == set(DEVNET_ONLY), set(DEVNET_ONLY) - set(named)


def test_devnet_only_modules_outside_the_devnet_are_imported_only_by_their_gated_callers() -> None:
    for module, callers in GATED_CALLERS.items():
        assert importers(module) == set(callers), module


def test_a_method_name_in_code_is_found_and_one_in_prose_is_not() -> None:
    source = '"""Uses `anvil_setCode` in prose."""\nrpc.request("hardhat_setBalance", [])\n'
    assert dev_method_names(source) == ["hardhat_setBalance"]
