"""An op is judged against a head the bundler read up to HEAD_TTL_S ago (kept fresh ahead of
time where the process only accepts ops). One out of its validity window by that read but
inside it by the chain as it is now (a block at the window's edge, or a development chain
whose clock was moved by hand) is judged again by a fresh head before it is refused."""

from __future__ import annotations

import time

import pytest

from entryway.bundler import service
from tests.integration.bundler.conftest import RpcClient
from tests.integration.harness import Harness


async def test_an_op_due_by_the_chain_as_it_is_now_is_accepted(
    client: RpcClient, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service, "HEAD_TTL_S", 60.0)  # the head read below stays "recent"
    await client.rpc.bundler.head.now()  # read before the chain's clock moves
    before = await harness.latest_timestamp()
    due = max(before, int(time.time())) + 60
    await harness.advance_time(due - before + 60)

    owner = harness.new_key()
    draft = await harness.build_op(owner.address, b"")
    op = harness.sign(harness.sponsor(draft, valid_after=due), owner)
    assert (await client.send(op)).startswith("0x")

    # Not due by the chain as it is now either: refused, as before.
    other = harness.new_key()
    later = harness.sign(
        harness.sponsor(await harness.build_op(other.address, b""), valid_after=due + 3600),
        other,
    )
    error = await client.send_error(later)
    assert error["code"] == -32503 and f"not valid before {due + 3600}" in error["message"]
