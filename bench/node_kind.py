"""A node of another kind for the benchmarks: the test suite's relay (`tests.node_kinds`)
in front of the devnet's anvil, answering as a hosted provider, a public endpoint or geth,
run as its own process (`python -m bench.node_kind KIND UPSTREAM_URL`).

Its own process, so that what it costs (every request and answer parsed and written again
by Python) is billed neither to the bundler nor to the benchmark's load generator. The
`geth` kind plays geth's native erc7562Tracer by a JavaScript tracer that anvil runs: a
validation through it costs the node what that script costs, several times what geth's
tracer, written in Go, would.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tests.node_kinds import NodeKind, node_relay

READY_WITHIN_S = 30.0


@asynccontextmanager
async def node_kind_relay(upstream: str, kind: NodeKind | str) -> AsyncIterator[str]:
    """The URL of a relay of `kind` in front of `upstream`, in a process of its own that
    lives while the block runs."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.node_kind", str(NodeKind(kind)), upstream,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), READY_WITHIN_S)
        url = line.decode().strip()
        if not url.startswith("http"):
            raise RuntimeError(f"the {kind} relay did not start")
        yield url
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


async def serve(kind: str, upstream: str) -> None:
    """Serve until SIGTERM, having printed the relay's URL."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with node_relay(upstream, kind) as relay:
        print(relay.url, flush=True)
        await stop.wait()


def main() -> None:
    kind, upstream = sys.argv[1], sys.argv[2]
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(kind, upstream))


if __name__ == "__main__":
    main()
