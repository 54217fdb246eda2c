"""A devnet node that exits is started again, from its saved state, on the same port: the
service in front of it recovers without a restart of its own."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from entryway.devnet.anvil import AnvilProcess

log = logging.getLogger(__name__)

_RETRY_S = 1.0


async def supervise(node: AnvilProcess, after_restart: Callable[[], Awaitable[None]]) -> None:
    """Run until cancelled: each time `node` exits, start it again and run `after_restart`
    (what the node needs before use: predeploys, contracts, block pace). One log line for
    the exit, one for the recovery, however many tries it takes."""
    chain_id = node.config.chain_id
    while True:
        code = await node.exited()
        log.warning(
            "devnet node for chain %d exited (code %d); restarting it from its saved state",
            chain_id,
            code,
        )
        tries = 0
        while True:
            tries += 1
            try:
                await node.restart()
                await after_restart()
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if tries == 1:
                    log.warning(
                        "devnet node for chain %d did not restart yet (%s); retrying every %gs",
                        chain_id,
                        type(exc).__name__,
                        _RETRY_S,
                    )
                await asyncio.sleep(_RETRY_S)
        log.warning("devnet node for chain %d is back on %s", chain_id, node.rpc_url)
