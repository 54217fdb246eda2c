"""An op is judged against a head the bundler read up to HEAD_TTL_S ago (kept fresh ahead of
time where the process only accepts ops). One out of its validity window by that read but
inside it by the chain as it is now (a block at the window's edge, or a development chain
whose clock was moved by hand) is judged again by a fresh head before it is refused; so is
one under the base fee of that read, when the base fee has fallen since."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from entryway.bundler import service
from entryway.bundler.states import BundlingMode
from entryway.domain.networks import GWEI
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


async def test_an_op_over_the_base_fee_as_it_is_now_is_accepted(
    client: RpcClient, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The base fee fell with a block after the bundler's last head read: an op priced
    between the new base fee and the old one is judged by the head as it is now, and
    accepted; one under the new base fee is still refused. The refusal goes first: an
    accepted op may be bundled at once, and its block lowers the base fee again."""
    monkeypatch.setattr(service, "HEAD_TTL_S", 60.0)  # the head read below stays "recent"
    bundler = client.rpc.bundler
    monkeypatch.setattr(bundler, "mode", BundlingMode.AUTO)  # the base fee is checked
    old, new = 800 * GWEI, 100 * GWEI

    async def head_read_before_the_fee_fell() -> None:
        for base_fee in (old, None, new):
            if base_fee is None:
                assert (await bundler.head.now())[2] == old  # read while the base fee is high
                continue
            await harness.eth.rpc.request("anvil_setNextBlockBaseFeePerGas", [hex(base_fee)])
            await harness.eth.rpc.request("evm_mine", [])

    async def priced(max_fee: int) -> dict[str, str]:
        owner = harness.new_key()
        draft = await harness.build_op(owner.address, b"")
        op = replace(draft, max_fee_per_gas=max_fee, max_priority_fee_per_gas=30 * GWEI)
        return harness.sign(harness.sponsor(op), owner)

    under, between = await priced(new - 1), await priced(400 * GWEI)
    await head_read_before_the_fee_fell()
    error = await client.send_error(under)
    assert f"below the base fee {new}" in error["message"]  # the head as it is now
    await head_read_before_the_fee_fell()
    assert (await client.send(between)).startswith("0x")


async def test_the_bundler_stops_when_an_op_arrived_just_before(
    client: RpcClient, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An op accepted in auto mode wakes the bundler's loops; stopping it right then ends
    them (a cancellation that came as the wake-up did was once lost, and the stop waited for
    ever)."""
    bundler = client.rpc.bundler
    monkeypatch.setattr(bundler, "mode", BundlingMode.AUTO)
    owner = harness.new_key()
    op = harness.sign(harness.sponsor(await harness.build_op(owner.address, b"")), owner)
    assert (await client.send(op)).startswith("0x")
    monkeypatch.setattr(bundler, "mode", BundlingMode.MANUAL)
    stopping = asyncio.ensure_future(client.rpc.stop())
    done, _ = await asyncio.wait([stopping], timeout=10)
    assert done, "the bundler did not stop"
    await client.rpc.start()  # the fixture stops it again
