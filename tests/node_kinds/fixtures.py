"""Pytest fixtures for the relay. A test module (or a folder's conftest) takes them by name:

    from tests.node_kinds.fixtures import node_relays as node_relays
    from tests.node_kinds.fixtures import standalone_anvil as standalone_anvil

`node_relays` makes relays in front of any URL (the session's devnet, a standalone anvil)
and stops them when the test ends. `standalone_anvil` is an anvil of the test module's own,
with no contracts, for tests that mine thousands of blocks or rewrite state: the session's
devnet is shared, and its clock and head must not jump under other tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import pytest

from entryway.devnet.anvil import AnvilConfig, AnvilProcess
from tests.node_kinds.kinds import NodeKind, RelayLimits
from tests.node_kinds.relay import NodeRelay

STANDALONE_CHAIN_ID = 31337
RelayFactory = Callable[..., Awaitable[NodeRelay]]


@pytest.fixture(scope="module")
async def standalone_anvil() -> AsyncIterator[AnvilProcess]:
    node = AnvilProcess(AnvilConfig(chain_id=STANDALONE_CHAIN_ID))
    await node.start()
    try:
        yield node
    finally:
        await node.stop()


@pytest.fixture
async def node_relays() -> AsyncIterator[RelayFactory]:
    """`await node_relays(upstream_url, "hosted", max_batch=2)`: a started relay."""
    async with AsyncExitStack() as stack:

        async def make(
            upstream: str, kind: NodeKind | str = NodeKind.ANVIL, **limits: Any
        ) -> NodeRelay:
            relay = NodeRelay(upstream, kind, RelayLimits(**limits))
            return await stack.enter_async_context(relay)

        yield make
