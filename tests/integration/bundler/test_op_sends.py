"""An op's sends on its page (real devnet): the leader writes back how many times the op's
bundle was sent, each fee bump included, even when the status did not change; the op page
shows the count, each bump (old -> new fees) and the transaction that carried it, for an op
of the intake and for one the in-process bundler holds."""

from __future__ import annotations

import httpx

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.bundler.states import OpStatus, Tracked
from entryway.bundler.submission import Attempt
from entryway.domain.evm import hex_to_bytes
from entryway.domain.plans import PlanName
from entryway.service.services import Services
from entryway.storage.intake import OpIntakeStore
from tests.integration.bundler.test_intake_leader import (  # noqa: F401 (fixture)
    Leading,
    into_intake,
    leading,
    settled,
    signed_op,
)
from tests.integration.bundler.test_service_chain_routes import (  # noqa: F401 (fixture)
    CHAIN,
    rpc,
    service,
    tenant,
)
from tests.integration.harness import ETHER, Harness

GWEI = 10**9


async def test_the_leader_writes_back_each_send_and_fee_bump(
    leading: Leading,  # noqa: F811
    harness: Harness,
) -> None:
    leader, intake, bundler_rpc = leading
    op_hash = await into_intake(harness, intake, await signed_op(harness))
    await leader.step()
    # The bundle sent and still pending (what the executor's manager keeps for it).
    sends = [Attempt("0x" + "01" * 32, 2 * GWEI, GWEI, 1_700_000_000.0)]
    raw = hex_to_bytes(op_hash)
    bundler_rpc.bundler.mempool.remove(raw)
    bundler_rpc.bundler.tracked[raw] = Tracked(OpStatus.SUBMITTED, sends[0].tx_hash, attempts=sends)
    await leader.step()
    row = await intake.get(harness.chain_id, op_hash)
    assert row is not None and row.status is OpStatus.SUBMITTED
    assert row.attempts == tuple(sends)

    # Stuck: the manager sends it again with both fees raised; the status stays submitted,
    # yet the bump is written back.
    sends.append(Attempt("0x" + "02" * 32, 3 * GWEI, 2 * GWEI, 1_700_000_012.5))
    await leader.step()
    row = await intake.get(harness.chain_id, op_hash)
    assert row is not None and row.status is OpStatus.SUBMITTED
    assert row.attempts == tuple(sends)


async def test_a_bundled_ops_row_keeps_its_one_send(
    leading: Leading,  # noqa: F811
    harness: Harness,
) -> None:
    leader, intake, bundler_rpc = leading
    op_hash = await into_intake(harness, intake, await signed_op(harness))
    await leader.step()
    tx = await bundler_rpc.bundler.bundle_once(wait=True)
    row = await settled(leader, intake, op_hash)
    assert row.status is OpStatus.INCLUDED
    assert [a.tx_hash for a in row.attempts] == [tx]
    assert row.attempts[0].sent_at > 0


async def test_the_op_page_shows_attempts_and_fee_bumps(
    service: tuple[httpx.AsyncClient, Services],  # noqa: F811
    harness: Harness,
    bundler_rpc: BundlerRpc,
) -> None:
    client, services = service
    _, key = await tenant(services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    owner = harness.new_key()
    op = await harness.build_op(owner.address, b"")
    await harness.fund(op.sender, ETHER)
    op = harness.sign(op, owner)
    sent = await client.post(
        f"/rpc/{CHAIN}",
        headers=auth,
        json=rpc("eth_sendUserOperation", user_operation_json(op), harness.deployment.entry_point),
    )
    op_hash = sent.json()["result"]
    await bundler_rpc.dispatch(rpc("debug_bundler_sendBundleNow"))

    # The in-process bundler's own knowledge: one send, no bump.
    page = (await client.get(f"/v1/ops/{op_hash}", headers=auth)).json()
    submitted = next(s for s in page["lifecycle"] if s["step"] == "submitted")
    assert (submitted["attempts"], submitted["feeBumps"]) == (1, [])
    assert submitted["transactionHash"] == page["transactionHash"]
    assert submitted["at"] is not None

    # What a leader elsewhere wrote to the intake: two sends, one fee bump.
    intake = OpIntakeStore(services.store.engine)
    await intake.add(
        chain_id=CHAIN, user_op_hash=op_hash, entry_point=harness.deployment.entry_point, op=op
    )
    first = Attempt("0x" + "0a" * 32, 2 * GWEI, GWEI, 1_700_000_000.0)
    second = Attempt(page["transactionHash"], 3 * GWEI, 2 * GWEI, 1_700_000_030.0)

    class Sent:
        user_op_hash, status, tx_hash, reason = op_hash, OpStatus.SUBMITTED, second.tx_hash, None
        attempts = (first, second)

    await intake.mark_many(CHAIN, [Sent()])
    page = (await client.get(f"/v1/ops/{op_hash}", headers=auth)).json()
    submitted = next(s for s in page["lifecycle"] if s["step"] == "submitted")
    assert submitted["attempts"] == 2
    assert submitted["at"] == "2023-11-14T22:13:20+00:00"
    assert submitted["feeBumps"] == [
        {
            "at": "2023-11-14T22:13:50+00:00",
            "transactionHash": second.tx_hash,
            "from": {"maxFeePerGas": str(2 * GWEI), "maxPriorityFeePerGas": str(GWEI)},
            "to": {"maxFeePerGas": str(3 * GWEI), "maxPriorityFeePerGas": str(2 * GWEI)},
        }
    ]
