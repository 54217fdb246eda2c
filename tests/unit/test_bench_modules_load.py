"""Every benchmark module loads: `make bench-*` is run on demand, so nothing else would notice
a module that no longer imports (a dataclass whose fields went out of order in a merge)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import bench

MODULES = sorted(m.name for m in pkgutil.iter_modules(bench.__path__))


def test_the_benchmarks_are_all_found() -> None:
    expected = {
        "bundler",
        "bundler_versions",
        "validation_modes",
        "node_kind",
        "multiprocess",
        "api",
    }
    assert expected <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_a_benchmark_module_loads(name: str) -> None:
    module = importlib.import_module(f"bench.{name}")
    assert module.__name__ == f"bench.{name}"
