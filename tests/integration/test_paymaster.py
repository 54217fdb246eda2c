"""VerifyingPaymaster: sponsors what the service signer signed, refuses the rest without
reverting, and lets its owner rotate signers."""

from __future__ import annotations

from entryway.domain.signatures import paymaster_digest
from tests.integration.harness import ETHER, PAYMASTER, Harness

SIG_VALIDATION_FAILED = 1


def unpack_validation_data(value: int) -> tuple[int, int, int]:
    """(aggregator-or-sig-failed, validUntil, validAfter) as the EntryPoint packs them."""
    return value & (2**160 - 1), (value >> 160) & (2**48 - 1), value >> 208


async def validate_as_entry_point(h: Harness, op: object) -> int:
    """Call validatePaymasterUserOp from the EntryPoint's address: it must return, not revert."""
    context, validation = await h.call(
        h.deployment.paymaster,
        PAYMASTER,
        "validatePaymasterUserOp",
        op.packed(),  # type: ignore[attr-defined]
        b"\x00" * 32,
        0,
        sender=h.deployment.entry_point,
    )
    assert context == b""
    return int(validation)


async def test_signed_op_is_sponsored_for_an_account_without_eth(harness: Harness) -> None:
    owner = harness.new_key()
    op = harness.sponsor(await harness.build_op(owner.address, b""))
    op = harness.sign(op, owner)
    assert await harness.eth.get_balance(op.sender) == 0
    deposit_before = await harness.call(harness.deployment.paymaster, PAYMASTER, "getDeposit")

    bundle = await harness.handle_ops([op])

    outcome = bundle.outcomes[0]
    assert outcome.success and outcome.paymaster == harness.deployment.paymaster
    assert await harness.eth.get_balance(op.sender) == 0
    deposit_after = await harness.call(harness.deployment.paymaster, PAYMASTER, "getDeposit")
    assert deposit_before - deposit_after == outcome.actual_gas_cost > 0


async def test_local_digest_matches_get_hash(harness: Harness) -> None:
    owner = harness.new_key()
    op = harness.sponsor(await harness.build_op(owner.address, b"\xab" * 40), valid_until=10**9)
    local = paymaster_digest(op, harness.chain_id, harness.deployment.paymaster, 10**9, 0)
    on_chain = await harness.call(
        harness.deployment.paymaster, PAYMASTER, "getHash", op.packed(), 10**9, 0
    )
    assert local == on_chain


async def test_bad_signature_fails_validation_without_reverting(harness: Harness) -> None:
    owner = harness.new_key()
    op = harness.sign(
        harness.sponsor(await harness.build_op(owner.address, b""), tamper=True), owner
    )
    flag, _, _ = unpack_validation_data(await validate_as_entry_point(harness, op))
    assert flag == SIG_VALIDATION_FAILED
    error = await harness.handle_ops_error([op])
    assert error.args[1] == "AA34 signature error"


async def test_signature_from_an_unknown_signer_fails(harness: Harness) -> None:
    owner, rogue = harness.new_key(), harness.new_key()
    op = harness.sign(
        harness.sponsor(await harness.build_op(owner.address, b""), signer=rogue), owner
    )
    flag, _, _ = unpack_validation_data(await validate_as_entry_point(harness, op))
    assert flag == SIG_VALIDATION_FAILED


async def test_expired_window_fails_validation_without_reverting(harness: Harness) -> None:
    owner = harness.new_key()
    now = await harness.latest_timestamp()
    op = harness.sponsor(await harness.build_op(owner.address, b""), valid_until=now - 10)
    op = harness.sign(op, owner)
    flag, valid_until, _ = unpack_validation_data(await validate_as_entry_point(harness, op))
    assert (flag, valid_until) == (0, now - 10)  # signature fine; the window is the EntryPoint's
    error = await harness.handle_ops_error([op])
    assert error.args[1] == "AA32 paymaster expired or not due"


async def test_not_yet_valid_window_is_refused(harness: Harness) -> None:
    owner = harness.new_key()
    now = await harness.latest_timestamp()
    op = harness.sponsor(await harness.build_op(owner.address, b""), valid_after=now + 3600)
    error = await harness.handle_ops_error([harness.sign(op, owner)])
    assert error.args[1] == "AA32 paymaster expired or not due"


async def test_signature_for_another_chain_fails(harness: Harness) -> None:
    owner = harness.new_key()
    op = harness.sponsor(await harness.build_op(owner.address, b""), chain_id=84532)
    op = harness.sign(op, owner)
    flag, _, _ = unpack_validation_data(await validate_as_entry_point(harness, op))
    assert flag == SIG_VALIDATION_FAILED
    error = await harness.handle_ops_error([op])
    assert error.args[1] == "AA34 signature error"


async def test_malformed_paymaster_data_fails_without_reverting(harness: Harness) -> None:
    owner = harness.new_key()
    op = harness.sponsor(await harness.build_op(owner.address, b""))
    short = op.with_paymaster(op.paymaster or "", 60_000, 0, op.paymaster_data[:-7])
    flag, _, _ = unpack_validation_data(await validate_as_entry_point(harness, short))
    assert flag == SIG_VALIDATION_FAILED


async def test_owner_rotates_signers_and_strangers_cannot(harness: Harness) -> None:
    owner, new_signer, stranger = harness.new_key(), harness.new_key(), harness.new_key()
    pm = harness.deployment.paymaster
    error = await harness.revert_error(
        pm, PAYMASTER, PAYMASTER.encode_call("setSigner", stranger.address, True), stranger.address
    )
    assert error.name == "OwnableUnauthorizedAccount"

    await harness.send_from(
        harness.operator, pm, PAYMASTER.encode_call("setSigner", new_signer.address, True)
    )
    op = harness.sign(
        harness.sponsor(await harness.build_op(owner.address, b""), signer=new_signer), owner
    )
    assert (await harness.handle_ops([op])).outcomes[0].success

    await harness.send_from(
        harness.operator, pm, PAYMASTER.encode_call("setSigner", new_signer.address, False)
    )
    op2 = harness.sign(
        harness.sponsor(await harness.build_op(owner.address, b"", nonce=1), signer=new_signer),
        owner,
    )
    assert (await harness.handle_ops_error([op2])).args[1] == "AA34 signature error"


async def test_paymaster_is_funded_and_staked_on_the_devnet(harness: Harness) -> None:
    from tests.integration.harness import EP

    info = await harness.call(
        harness.deployment.entry_point, EP, "getDepositInfo", harness.deployment.paymaster
    )
    deposit, staked, stake, unstake_delay, _ = info
    assert staked and stake >= 10 * ETHER and unstake_delay >= 86_400
    assert deposit > 1000 * ETHER
