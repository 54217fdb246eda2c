"""Test support: a relay in front of a real node that behaves like another kind of node (a
hosted provider, a public endpoint, geth, anvil), so the node client is tested against each
kind's refusals and limits with real chain state behind them.

`node_relay(upstream_url, "hosted")` is an async context manager giving a started
`NodeRelay`; `tests.node_kinds.fixtures` has the same as pytest fixtures (a factory, and a
standalone anvil for tests that mine thousands of blocks)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from tests.node_kinds.kinds import NodeKind, RelayLimits
from tests.node_kinds.relay import NodeRelay

__all__ = ["NodeKind", "NodeRelay", "RelayLimits", "node_relay"]


@asynccontextmanager
async def node_relay(
    upstream: str, kind: NodeKind | str = NodeKind.ANVIL, **limits: Any
) -> AsyncIterator[NodeRelay]:
    """A relay of `kind` in front of `upstream`, serving while the block runs; `limits` are
    `RelayLimits` fields (e.g. `max_log_range=100`, `max_batch=2`)."""
    async with NodeRelay(upstream, kind, RelayLimits(**limits)) as relay:
        yield relay
