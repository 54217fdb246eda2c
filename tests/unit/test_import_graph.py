"""The package layering of architecture section 5, checked on the source: the top-level
packages of `entryway` import each other without a cycle (use cases depend on ports, adapters
and entry points on use cases, never back), and `domain` imports nothing of `entryway` but
itself and the root exception module."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import entryway

ROOT = Path(entryway.__file__).parent
DOMAIN_MAY_IMPORT = {"domain", "errors"}
# Cycles still being untangled, allowed among these packages only. Empty since the
# composition root got a package of its own (`entryway.composition`); keep it so.
PENDING_COMPOSITION_CYCLE: frozenset[str] = frozenset()


def _unit(path: Path) -> str:
    """The top-level package (or module) a source file belongs to."""
    parts = path.relative_to(ROOT).parts
    return parts[0].removesuffix(".py")


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        if node.module == "entryway":  # `from entryway import contracts`
            return [f"entryway.{alias.name}" for alias in node.names]
        return [node.module]
    return []


def import_graph() -> dict[str, dict[str, set[str]]]:
    """{package: {imported package: {files importing it}}}, every import counted, those
    inside functions and under TYPE_CHECKING too."""
    graph: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in sorted(ROOT.rglob("*.py")):
        source = _unit(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for name in _imported(node):
                if name.startswith("entryway."):
                    target = name.split(".")[1]
                    if target != source:
                        graph[source][target].add(str(path.relative_to(ROOT)))
    return graph


def cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_top_level_packages_import_each_other_without_a_cycle() -> None:
    graph = import_graph()
    found = [c for c in cycles(graph) if not set(c) <= PENDING_COMPOSITION_CYCLE]
    detail = {
        tuple(c): {f"{a} -> {b}": sorted(graph[a][b]) for a in c for b in graph[a] if b in c}
        for c in found
    }
    assert found == [], detail


def test_the_domain_imports_nothing_but_itself_and_the_root_exception() -> None:
    outside = {
        target: sorted(files)
        for target, files in import_graph()["domain"].items()
        if target not in DOMAIN_MAY_IMPORT
    }
    assert outside == {}


def test_wallets_and_paymaster_reach_the_bundler_through_its_port() -> None:
    """Use cases call the bundler in process through `bundler.port` (dataclasses), never
    through its JSON-RPC dispatcher or its hex dicts, and never import an entry point
    (`service`). Only the paymaster's own JSON-RPC endpoint (ERC-7677) parses client JSON
    with the bundler's wire layer, so both endpoints accept the same ops."""
    banned = ("entryway.service", "entryway.bundler.rpc_methods", "entryway.bundler.server")
    wire = "entryway.bundler.rpc_types"
    found = {}
    for package in ("wallets", "paymaster"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = [n for node in ast.walk(tree) for n in _imported(node)]
            endpoint = path.name == "erc7677.py"
            bad = sorted(n for n in names if n.startswith(banned) or (n == wire and not endpoint))
            if bad:
                found[str(path.relative_to(ROOT))] = bad
    assert found == {}


def test_the_cycle_finder_finds_a_cycle() -> None:
    looped = {"a": {"b": {"a.py"}}, "b": {"c": {"b.py"}}, "c": {"a": {"c.py"}}, "d": {}}
    assert cycles(looped) == [["a", "b", "c"]]
    assert cycles({"a": {"b": {"a.py"}}, "b": {}}) == []


def test_only_the_command_line_imports_the_composition_root() -> None:
    importers = {source for source, targets in import_graph().items() if "composition" in targets}
    assert importers <= {"cli"}, importers
