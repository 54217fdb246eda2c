"""Guardians and timelocked social recovery on the SmartAccount, driven by UserOperations."""

from __future__ import annotations

from eth_account.signers.local import LocalAccount

from entryway.domain.signatures import recovery_digest, sign_digest, sort_approvals
from entryway.domain.userop import UserOperation
from tests.integration.harness import ACCOUNT, Harness, self_call

DELAY = 2 * 24 * 3600


class Wallet:
    """A deployed, sponsored SmartAccount and the keys around it."""

    def __init__(self, h: Harness, owner: LocalAccount, address: str) -> None:
        self.h, self.owner, self.address = h, owner, address

    async def op(self, call_data: bytes, signer: LocalAccount | None = None) -> UserOperation:
        op = self.h.sponsor(
            await self.h.build_op(self.owner.address, call_data, sender=self.address)
        )
        return self.h.sign(op, signer or self.owner)

    async def run(self, call_data: bytes, signer: LocalAccount | None = None) -> bool:
        bundle = await self.h.handle_ops([await self.op(call_data, signer)])
        return bundle.outcomes[0].success

    async def manage(self, fn: str, *args: object) -> bool:
        return await self.run(self_call(self.address, ACCOUNT.encode_call(fn, *args)))

    async def read(self, fn: str, *args: object) -> object:
        return await self.h.call(self.address, ACCOUNT, fn, *args)

    async def approvals(self, guardians: list[LocalAccount], new_owner: str) -> list[bytes]:
        nonce = int(await self.read("recoveryNonce"))  # type: ignore[call-overload]
        digest = recovery_digest(self.address, new_owner, nonce, self.h.chain_id)
        assert digest == await self.read("recoveryDigest", new_owner)
        return sort_approvals({g.address: sign_digest(bytes(g.key), digest) for g in guardians})

    async def start_recovery_op(self, new_owner: str, approvals: list[bytes]) -> UserOperation:
        """A recovery op carries no owner signature: the guardians' approvals authorise it."""
        call = ACCOUNT.encode_call("startRecovery", new_owner, approvals)
        return self.h.sponsor(await self.h.build_op(self.owner.address, call, sender=self.address))

    async def finalize_op(self) -> UserOperation:
        call = ACCOUNT.encode_call("finalizeRecovery")
        return self.h.sponsor(await self.h.build_op(self.owner.address, call, sender=self.address))


async def new_wallet(h: Harness, guardians: list[LocalAccount] = (), threshold: int = 0) -> Wallet:  # type: ignore[assignment]
    owner = h.new_key()
    op = h.sign(h.sponsor(await h.build_op(owner.address, b"")), owner)
    assert (await h.handle_ops([op])).outcomes[0].success
    wallet = Wallet(h, owner, op.sender)
    for g in guardians:
        assert await wallet.manage("addGuardian", g.address)
    if threshold:
        assert await wallet.manage("setGuardianThreshold", threshold)
    return wallet


async def test_guardians_are_managed_through_user_operations(harness: Harness) -> None:
    g1, g2, g3 = (harness.new_key() for _ in range(3))
    wallet = await new_wallet(harness, [g1, g2, g3])
    assert await wallet.read("guardianCount") == 3
    assert await wallet.read("guardianThreshold") == 1  # the first guardian sets it to 1

    assert await wallet.manage("setGuardianThreshold", 2)
    assert await wallet.read("guardianThreshold") == 2
    assert await wallet.manage("removeGuardian", g3.address)
    assert await wallet.read("isGuardian", g3.address) is False
    assert await wallet.read("guardianCount") == 2
    # A threshold above the guardian count fails inside execution (the op is still mined).
    assert await wallet.manage("setGuardianThreshold", 3) is False
    assert await wallet.read("guardianThreshold") == 2
    assert await wallet.manage("removeGuardian", g2.address)
    assert await wallet.read("guardianThreshold") == 1  # lowered to what remains


async def test_only_the_account_itself_changes_guardians(harness: Harness) -> None:
    g = harness.new_key()
    wallet = await new_wallet(harness)
    for caller in (wallet.owner.address, harness.deployment.entry_point, g.address):
        error = await harness.revert_error(
            wallet.address, ACCOUNT, ACCOUNT.encode_call("addGuardian", g.address), sender=caller
        )
        assert error.name == "NotSelf"
    # A guardian change the owner did not sign is refused at validation.
    error = await harness.handle_ops_error(
        [
            await wallet.op(
                self_call(wallet.address, ACCOUNT.encode_call("addGuardian", g.address)), g
            )
        ]
    )
    assert error.args[1] == "AA24 signature error"


async def test_approvals_below_the_threshold_are_rejected(harness: Harness) -> None:
    g1, g2 = harness.new_key(), harness.new_key()
    wallet = await new_wallet(harness, [g1, g2], threshold=2)
    new_owner = harness.new_key()
    one = await wallet.approvals([g1], new_owner.address)

    error = await harness.handle_ops_error([await wallet.start_recovery_op(new_owner.address, one)])
    assert error.args[1] == "AA24 signature error"
    direct = ACCOUNT.encode_call("startRecovery", new_owner.address, one)
    error = await harness.revert_error(wallet.address, ACCOUNT, direct, sender=g1.address)
    assert error.name == "NotEnoughApprovals"
    # The same guardian twice does not make two approvals.
    twice = one + one
    direct = ACCOUNT.encode_call("startRecovery", new_owner.address, twice)
    error = await harness.revert_error(wallet.address, ACCOUNT, direct, sender=g1.address)
    assert error.name == "NotEnoughApprovals"


async def test_recovery_after_the_delay_hands_the_account_to_the_new_owner(
    harness: Harness,
) -> None:
    g1, g2, g3 = (harness.new_key() for _ in range(3))
    wallet = await new_wallet(harness, [g1, g2, g3], threshold=2)
    new_owner = harness.new_key()
    approvals = await wallet.approvals([g1, g3], new_owner.address)

    started = await harness.handle_ops(
        [await wallet.start_recovery_op(new_owner.address, approvals)]
    )
    assert started.outcomes[0].success
    pending_owner, execute_after = await wallet.read("pendingRecovery")  # type: ignore[misc]
    assert pending_owner == new_owner.address
    assert execute_after == await harness.latest_timestamp() + DELAY

    # Before the delay: the op is not due, and a direct call reverts.
    error = await harness.handle_ops_error([await wallet.finalize_op()])
    assert error.args[1] == "AA22 expired or not due"
    error = await harness.revert_error(
        wallet.address, ACCOUNT, ACCOUNT.encode_call("finalizeRecovery"), sender=g1.address
    )
    assert error.name == "RecoveryNotDue"

    await harness.advance_time(DELAY + 1)
    assert (await harness.handle_ops([await wallet.finalize_op()])).outcomes[0].success
    assert await wallet.read("owner") == new_owner.address
    assert await wallet.read("recoveryNonce") == 1

    error = await harness.handle_ops_error([await wallet.op(b"", signer=wallet.owner)])
    assert error.args[1] == "AA24 signature error"  # the old owner lost control
    assert await wallet.run(b"", signer=new_owner)  # the new one has it


async def test_owner_cancels_and_stale_approvals_are_void(harness: Harness) -> None:
    g1 = harness.new_key()
    wallet = await new_wallet(harness, [g1])
    thief = harness.new_key()
    approvals = await wallet.approvals([g1], thief.address)
    assert (
        (await harness.handle_ops([await wallet.start_recovery_op(thief.address, approvals)]))
        .outcomes[0]
        .success
    )

    # A second recovery cannot start while one is pending.
    error = await harness.handle_ops_error(
        [await wallet.start_recovery_op(thief.address, approvals)]
    )
    assert error.args[1] == "AA24 signature error"

    assert await wallet.manage("cancelRecovery")
    assert await wallet.read("pendingRecovery") == ("0x0000000000000000000000000000000000000000", 0)
    assert await wallet.read("recoveryNonce") == 1

    # The approvals were for nonce 0: after the cancel they are worth nothing.
    error = await harness.handle_ops_error(
        [await wallet.start_recovery_op(thief.address, approvals)]
    )
    assert error.args[1] == "AA24 signature error"
    direct = ACCOUNT.encode_call("startRecovery", thief.address, approvals)
    error = await harness.revert_error(wallet.address, ACCOUNT, direct, sender=g1.address)
    assert error.name == "NotEnoughApprovals"
    await harness.advance_time(DELAY + 1)
    assert await wallet.read("owner") == wallet.owner.address


async def test_owner_may_cancel_directly_but_a_guardian_may_not(harness: Harness) -> None:
    g1 = harness.new_key()
    wallet = await new_wallet(harness, [g1])
    new_owner = harness.new_key()
    approvals = await wallet.approvals([g1], new_owner.address)
    await harness.send_from(
        g1, wallet.address, ACCOUNT.encode_call("startRecovery", new_owner.address, approvals)
    )
    error = await harness.revert_error(
        wallet.address, ACCOUNT, ACCOUNT.encode_call("cancelRecovery"), sender=g1.address
    )
    assert error.name == "NotSelf"
    await harness.send_from(wallet.owner, wallet.address, ACCOUNT.encode_call("cancelRecovery"))
    assert await wallet.read("recoveryNonce") == 1


async def test_recovery_delay_is_set_by_the_account_with_a_floor(harness: Harness) -> None:
    wallet = await new_wallet(harness)
    assert await wallet.read("recoveryDelay") == DELAY
    assert await wallet.manage("setRecoveryDelay", 3 * 3600)
    assert await wallet.read("recoveryDelay") == 3 * 3600
    assert await wallet.manage("setRecoveryDelay", 60) is False  # below the one-hour floor
    assert await wallet.read("recoveryDelay") == 3 * 3600
