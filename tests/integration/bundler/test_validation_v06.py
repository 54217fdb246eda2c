"""Validation of v0.6 ops by EntryPoint v0.6's own `simulateValidation` (its ValidationResult
revert), judged by the ERC-7562 rules on its trace: a SimpleAccount's first op validates with
the prefund v0.6 asks (three times the verification gas once a paymaster is named), a bad
signature and an unfunded sender are refused, an account breaking an opcode rule is refused
where the same account without that opcode is accepted, and an op whose limits pay less than it
spends (which would revert its whole bundle) is refused on arrival."""

from __future__ import annotations

from dataclasses import replace

import pytest

from entryway.bundler.errors import BundlerError, RpcErrorCode
from entryway.bundler.validation.modes import ValidationMode
from entryway.bundler.validation.rules import RuleSettings
from entryway.bundler.validation.simulation import Validator
from entryway.bundler.validation.simulation_v06 import (
    ENTRY_POINT_V06,
    SimulatorV06,
    sender_creator_v06,
)
from entryway.chain.rpc import RpcError
from entryway.domain.entry_points import V06, EntryPointVersion
from entryway.domain.evm import create_address
from entryway.domain.userop import UserOperation
from entryway.domain.userop_v06 import UserOperationV06
from tests.integration.harness import ETHER, Harness
from tests.integration.v06_ops import first_op, sign

# A minimal v0.6 account: pays the EntryPoint what it asks (the third argument of
# validateUserOp) and answers validationData 0; the variant reads TIMESTAMP first (OP-011).
# CALL(gas, caller, calldata[0x44], 0, 0, 0, 0), then return one zero word.
PAYING_ACCOUNT = bytes.fromhex("6000600060006000604435335af15060206000f3")
TIMESTAMP_ACCOUNT = bytes.fromhex("4250") + PAYING_ACCOUNT
BENEFICIARY = "0x" + "be" * 20  # who a bundle run by eth_call pays


async def validator(h: Harness, *, mode: ValidationMode = ValidationMode.OPCODES) -> Validator:
    code = await h.eth.get_code(V06.address)
    rules = RuleSettings(min_stake_wei=10**18, min_unstake_delay_s=86_400)
    return Validator(
        SimulatorV06(h.eth, V06.address),
        sender_creator_v06(V06.address, code),
        rules.for_version(EntryPointVersion.V06),
        h.chain_id,
        mode=mode,
    )


async def now(h: Harness) -> int:
    return int((await h.eth.get_block("latest"))["timestamp"], 16)


async def plain_account_op(h: Harness, code: bytes) -> UserOperation:
    sender = create_address(h.new_key().address, 0)
    await h.eth.rpc.request("anvil_setCode", [sender, "0x" + code.hex()])
    await h.fund(sender, ETHER)
    max_fee, priority = await h.fees()
    op = UserOperationV06(sender, 0, b"", b"", 50_000, 100_000, 50_000, max_fee, priority)
    return UserOperation.from_v06(op)


async def test_a_first_op_validates_with_the_prefund_v06_asks(harness: Harness) -> None:
    op, _ = await first_op(harness)
    outcome = await (await validator(harness)).validate(
        UserOperation.from_v06(op), now=await now(harness)
    )
    assert outcome.prefund == op.required_prefund == op.max_gas * op.max_fee_per_gas
    assert 0 < outcome.pre_op_gas <= op.verification_gas_limit + op.pre_verification_gas
    assert not outcome.account.signature_failed
    assert outcome.valid_until == 2**48 - 1


async def test_a_named_paymaster_triples_the_verification_gas_in_the_prefund(
    harness: Harness,
) -> None:
    op, _ = await first_op(harness)
    paymaster = create_address(harness.new_key().address, 0)  # no code: AA30
    internal = UserOperation.from_v06(op.with_paymaster_and_data(bytes.fromhex(paymaster[2:])))
    with pytest.raises(BundlerError) as refused:
        await (await validator(harness, mode=ValidationMode.UNTRACED)).validate(
            internal, now=await now(harness)
        )
    assert refused.value.code == RpcErrorCode.REJECTED_BY_PAYMASTER
    assert "AA30" in refused.value.message


async def test_a_bad_signature_is_refused(harness: Harness) -> None:
    op, _ = await first_op(harness)
    other, _ = await first_op(harness)
    forged = op.with_signature(sign(harness, op, harness.new_key()).signature)
    for checked in (forged, replace(op, signature=other.signature)):
        with pytest.raises(BundlerError) as refused:
            await (await validator(harness)).validate(
                UserOperation.from_v06(checked), now=await now(harness)
            )
        assert refused.value.code == RpcErrorCode.INVALID_SIGNATURE
        # v0.6 has one flag for both signatures, and the message says so.
        assert refused.value.message == "Invalid UserOp signature or paymaster signature"


async def test_an_unfunded_sender_is_refused_with_the_entry_points_reason(
    harness: Harness,
) -> None:
    op, _ = await first_op(harness)
    await harness.fund(op.sender, 0)
    with pytest.raises(BundlerError) as refused:
        await (await validator(harness)).validate(
            UserOperation.from_v06(op), now=await now(harness)
        )
    assert refused.value.code == RpcErrorCode.REJECTED_BY_EP_OR_ACCOUNT
    assert "AA21" in refused.value.message


async def test_an_account_breaking_an_opcode_rule_is_refused(harness: Harness) -> None:
    clean = await plain_account_op(harness, PAYING_ACCOUNT)
    await (await validator(harness)).validate(clean, now=await now(harness))
    breaking = await plain_account_op(harness, TIMESTAMP_ACCOUNT)
    with pytest.raises(BundlerError) as refused:
        await (await validator(harness)).validate(breaking, now=await now(harness))
    assert refused.value.code == RpcErrorCode.BANNED_OPCODE
    assert refused.value.data == {"rule": "OP-011"}
    # Untraced, simulation alone lets it through: the trace is what refuses it.
    await (await validator(harness, mode=ValidationMode.UNTRACED)).validate(
        breaking, now=await now(harness)
    )


async def _bundle_reverts(h: Harness, op: UserOperation) -> str | None:
    """The EntryPoint's reason if `handleOps([op])` reverts on the node, else None."""
    data = ENTRY_POINT_V06.abi.encode_call("handleOps", [op.as_v06().as_tuple()], BENEFICIARY)
    try:
        await h.eth.call(V06.address, data)
    except RpcError as exc:
        decoded = ENTRY_POINT_V06.abi.decode_error(exc.revert_data or b"")
        return str(decoded.args[1]) if decoded is not None else exc.message
    return None


async def test_an_op_is_refused_on_arrival_exactly_when_its_bundle_would_revert(
    harness: Harness,
) -> None:
    # No call data and no call gas: v0.6 makes no call, yet counts its own few hundred gas
    # of bookkeeping around it against the op. A verification limit of what validation uses
    # passes validation, and then the op spends more than its limits pay for (the fee paid
    # being the whole maxFeePerGas): v0.6 reverts the whole bundle, AA51. The least limit
    # a bundle takes is found on the node, as the public conformance suite finds it; one gas
    # less must be refused (simulateHandleOp, which spends a few gas less than handleOps,
    # would let it through) and that limit accepted.
    roomy = await plain_account_op(harness, PAYING_ACCOUNT)
    checker = await validator(harness)
    outcome = await checker.validate(roomy, now=await now(harness))
    used = outcome.pre_op_gas - roomy.pre_verification_gas

    def with_limit(limit: int) -> UserOperation:
        return replace(
            roomy,
            verification_gas_limit=limit,
            call_gas_limit=0,
            max_priority_fee_per_gas=roomy.max_fee_per_gas,
        )

    low, high = used, used + 5_000  # the bundle reverts at `low` and goes through at `high`
    assert "AA51" in (await _bundle_reverts(harness, with_limit(low)) or "")
    assert await _bundle_reverts(harness, with_limit(high)) is None
    while high - low > 1:
        mid = (low + high) // 2
        if await _bundle_reverts(harness, with_limit(mid)) is None:
            high = mid
        else:
            low = mid
    with pytest.raises(BundlerError) as refused:
        await checker.validate(with_limit(low), now=await now(harness))
    assert refused.value.code == RpcErrorCode.REJECTED_BY_EP_OR_ACCOUNT
    assert "AA51" in refused.value.message
    await checker.validate(with_limit(high), now=await now(harness))
    # Validation alone passes the short one: the simulated bundle is what refuses it.
    await checker.validate(with_limit(low), now=await now(harness), execution=False)
