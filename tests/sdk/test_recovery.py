"""Guardians and social recovery through the SDK, on `entryway up`'s devnet: every step a
sponsored UserOperation; the recovery delay passed by moving anvil's clock."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from entryway_sdk import (
    Entryway,
    PendingUserOperation,
    SignerRequiredError,
    SmartWallet,
    UserOperationRejectedError,
    sign_recovery_approval,
)
from eth_account import Account
from eth_account.signers.local import LocalAccount

from tests.sdk.conftest import Service

pytestmark = pytest.mark.anvil
CHAIN = 80002
DELAY = 2 * 24 * 3600  # SmartAccount's default recovery delay


@pytest.fixture
async def client(service: Service) -> AsyncIterator[Entryway]:
    async with await Entryway.init(
        api_key=service.api_key,
        rpc_url=service.rpc_url(CHAIN),
        chain_id=CHAIN,
        base_url=service.url,
    ) as client:
        yield client


async def mined(op: PendingUserOperation) -> None:
    receipt = await op.wait(timeout=30, poll_interval=0.2)
    assert receipt.success, receipt.reason


async def guarded_wallet(
    client: Entryway, guardians: list[LocalAccount], threshold: int
) -> tuple[SmartWallet, LocalAccount]:
    owner = Account.create()
    wallet = await client.wallet(owner)
    for guardian in guardians:  # the first op also deploys the account
        await mined(await wallet.add_guardian(guardian.address))
    if threshold != 1:
        await mined(await wallet.set_guardian_threshold(threshold))
    return wallet, owner


async def test_guardians_then_a_full_recovery(client: Entryway, service: Service) -> None:
    g1, g2, g3 = (Account.create() for _ in range(3))
    wallet, owner = await guarded_wallet(client, [g1, g2, g3], threshold=2)
    info = await wallet.info()
    assert set(info.guardians) == {g1.address, g2.address, g3.address} and info.threshold == 2
    await mined(await wallet.remove_guardian(g3.address))
    info = await wallet.info()
    assert set(info.guardians) == {g1.address, g2.address} and info.threshold == 2

    # The owner's key is lost: the account by its address, and two guardians' approvals.
    new_owner = Account.create()
    lost = client.wallet_at(wallet.address)
    with pytest.raises(SignerRequiredError):
        await lost.send({"to": new_owner.address})
    one = await lost.recovery_approval(g1, new_owner.address)
    with pytest.raises(UserOperationRejectedError):  # under the threshold
        await lost.start_recovery(new_owner.address, [one])
    two = await sign_recovery_approval(g2, wallet.address, new_owner.address, 0, CHAIN)
    await mined(await lost.start_recovery(new_owner.address, [two, one]))
    pending = (await lost.info()).pending_recovery
    assert pending is not None and pending.new_owner == new_owner.address

    with pytest.raises(UserOperationRejectedError) as early:
        await lost.finalize_recovery()
    # before the delay, estimation finds the account's own refusal
    assert early.value.rpc_code == -32521
    error = early.value.account_error
    assert (
        error is not None
        and error[0] == "RecoveryNotDue"
        and error[1][0] == (pending.execute_after)
    )

    await service.node(CHAIN, "evm_increaseTime", DELAY + 1)
    await service.node(CHAIN, "evm_mine")
    await mined(await lost.finalize_recovery())
    info = await lost.info()
    assert info.owner == new_owner.address and info.pending_recovery is None
    assert await lost.recovery_nonce() == 1

    with pytest.raises(UserOperationRejectedError) as stale:  # the old key lost control
        await wallet.send({"to": owner.address})
    assert stale.value.rpc_code == -32507
    await mined(await lost.with_owner(new_owner).send({"to": owner.address}))


async def test_the_owner_cancels_and_the_approvals_are_void(client: Entryway) -> None:
    guardian, thief = Account.create(), Account.create()
    wallet, owner = await guarded_wallet(client, [guardian], threshold=1)
    approval = await wallet.recovery_approval(guardian, thief.address)
    await mined(await wallet.start_recovery(thief.address, [approval]))
    assert (await wallet.info()).pending_recovery is not None

    await mined(await wallet.cancel_recovery())
    info = await wallet.info()
    assert info.pending_recovery is None and info.owner == owner.address
    assert await wallet.recovery_nonce() == 1
    with pytest.raises(UserOperationRejectedError):  # signed under nonce 0
        await wallet.start_recovery(thief.address, [approval])
