"""Webhook events from a sponsored op's receipt on anvil: the op that deploys a wallet
announces `account.deployed` (the account, its factory, our paymaster) once, however often its
settlement runs; a later op from the same wallet announces none."""

from __future__ import annotations

from entryway.bundler.port import Receipt
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.composition.events import op_events
from entryway.domain.evm import checksum
from entryway.domain.webhooks import EventType
from entryway.paymaster.settlement import SponsoredOp
from tests.integration.conftest import CHAIN_ID
from tests.integration.harness import ACCOUNT, Harness
from tests.integration.wallets.test_wallet_charges import PROJECT, Sponsor
from tests.recorded_events import RecordedEvents


async def test_an_op_that_deploys_a_wallet_announces_it_once(
    harness: Harness, auto_bundler: BundlerRpc
) -> None:
    sponsor = Sponsor(harness, auto_bundler)
    events = RecordedEvents()
    announce = op_events(events)
    settled: list[SponsoredOp] = []

    async def on_settled(sponsored: SponsoredOp, receipt: Receipt) -> None:
        settled.append(sponsored)
        await announce(sponsored, receipt)

    sponsor.settler.on_settled = on_settled
    owner = harness.new_key()

    draft = await harness.build_op(owner.address, b"")
    assert draft.factory is not None  # a new wallet: this op deploys it
    held, _ = await sponsor.run(draft, owner)
    account = held.subject
    assert account is not None
    assert await harness.eth.get_code(account)
    # The settlement task may run again (a retry, a restart): nothing is announced twice.
    (first,) = settled
    assert await sponsor.settler.check(first)
    assert await sponsor.settler.check(first)

    deployed = events.of(EventType.ACCOUNT_DEPLOYED)
    assert len(deployed) == 1, deployed
    project, data = deployed[0]
    assert project == PROJECT
    assert data["chainId"] == CHAIN_ID
    assert data["account"] == checksum(account)
    assert data["factory"] == checksum(harness.deployment.account_factory)
    assert data["paymaster"] == checksum(harness.deployment.paymaster)
    assert data["userOpHash"] == first.user_op_hash
    assert str(data["transactionHash"]).startswith("0x")

    # The wallet's next op deploys nothing, and announces only its inclusion.
    pay = ACCOUNT.encode_call("execute", harness.new_key().address, 0, b"")
    await sponsor.run(await harness.build_op(owner.address, pay, sender=account), owner)
    assert len(events.of(EventType.USEROP_INCLUDED)) == 2
    assert len(events.of(EventType.ACCOUNT_DEPLOYED)) == 1
