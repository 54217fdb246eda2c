"""What a sponsorship costs in credits (the price book, requirements §8.3), and how it is
held and settled.

At signing the most the op can cost is held: every gas limit it carries (preVerificationGas,
verification, call, and the paymaster's two) times its maxFeePerGas. The receipt's actual
gas cost settles it; an op that never lands is released.

An op that deploys an Entryway smart wallet, changes its guardians or takes a recovery step
also pays those operations' service fees (`domain.wallet_ops`), as components of the same
quote: the wallet charges depend on the op alone, so the hold and the settlement carry the
same ones and differ only in gas. An op that pays its own gas pays them in its relay charge
instead (`relay_quote`), so each op is charged them once, whoever pays its gas.

The hold's idempotency key is `sponsor:{chainId}:{hash}`, where the hash is the op's
EIP-712 struct hash with its paymaster fields left out. The final userOpHash covers the
paymasterAndData being signed (and so the validity window, which moves with the clock); the
key must not, so that a client asking twice for the same op is charged once, and so that the
mined op (paymaster fields and all) leads back to its hold.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from entryway.domain.pricebook import PriceBook, Quote
from entryway.domain.userop import UserOperation, user_op_struct_hash
from entryway.domain.wallet_ops import classify, wallet_operation, with_wallet_charges
from entryway.paymaster.calls import call_count, decode_calls
from entryway.paymaster.ports import SponsorshipLedger, UsageRecord

# Told the credits of each final charge made outside the meter (a relay, a settlement), by
# operation kind, for the credits metric: the meter's `counted` fits.
CreditsCounted = Callable[[str, int], None]


def max_gas(op: UserOperation) -> int:
    """The most gas the EntryPoint can charge the paymaster for `op`."""
    return (
        op.pre_verification_gas
        + op.verification_gas_limit
        + op.call_gas_limit
        + op.paymaster_verification_gas_limit
        + op.paymaster_post_op_gas_limit
    )


def max_gas_cost_wei(op: UserOperation) -> int:
    return max_gas(op) * op.max_fee_per_gas


def sponsorship_key(chain_id: int, op: UserOperation) -> str:
    bare = replace(
        op,
        paymaster=None,
        paymaster_verification_gas_limit=0,
        paymaster_post_op_gas_limit=0,
        paymaster_data=b"",
    )
    return f"sponsor:{chain_id}:0x{user_op_struct_hash(bare).hex()}"


def sponsorship_quote(
    prices: PriceBook,
    chain_id: int,
    op: UserOperation,
    gas_cost_wei: int,
    l1_fee_wei: int | None = None,
) -> Quote:
    """`l1_fee_wei`, the part of `gas_cost_wei` that paid for L1 data, is shown, not added."""
    base = prices.sponsored_user_operation(
        chain_id,
        calls=call_count(decode_calls(op.call_data)),
        calldata_bytes=len(op.call_data),
        gas_cost_wei=gas_cost_wei,
    )
    quote = with_wallet_charges(base, prices, chain_id, classify(op))
    if l1_fee_wei is None:
        return quote
    l1_credits = prices.gas_credits(chain_id, l1_fee_wei)
    return replace(quote, included=(("l1_fee_wei", l1_fee_wei), ("l1_fee_credits", l1_credits)))


def relay_quote(prices: PriceBook, chain_id: int, op: UserOperation, *, sponsored: bool) -> Quote:
    """The relay charge of an accepted op. A sponsored op's is nothing: its sponsorship quote
    holds the relay and any wallet charges. An op paying its own gas is charged validation and
    relay, plus the service fees of what it does to an Entryway wallet (without gas: the sender
    paid it), and is shown in usage as that wallet operation."""
    relay = prices.relayed_user_operation(
        calls=1, calldata_bytes=len(op.call_data), sponsored=sponsored
    )
    charges = () if sponsored else classify(op)
    operation = wallet_operation(charges)
    if operation is None:
        return relay
    return replace(with_wallet_charges(relay, prices, chain_id, charges), operation=operation)


def estimated_quote(prices: PriceBook, chain_id: int, op: UserOperation) -> Quote:
    """What is held at signing: the op at its gas limits and maximum fee."""
    return sponsorship_quote(prices, chain_id, op, max_gas_cost_wei(op))


async def settle_sponsorship(
    ledger: SponsorshipLedger,
    prices: PriceBook,
    *,
    project_id: str,
    chain_id: int,
    op: UserOperation,
    actual_gas_cost_wei: int,
    at: datetime,
    counted: CreditsCounted | None = None,
    l1_fee_wei: int | None = None,
) -> UsageRecord:
    """Settle a sponsored op from its receipt (`actualGasCost` of its UserOperationEvent, and
    on OP-stack chains its `l1Fee`, shown within it); `counted` is told the credits charged,
    once: settling again changes nothing."""
    actual = sponsorship_quote(prices, chain_id, op, actual_gas_cost_wei, l1_fee_wei)
    record = await ledger.settle(project_id, sponsorship_key(chain_id, op), actual, at)
    if counted is not None and not record.duplicate:
        counted(actual.operation.value, record.credits)
    return record


async def release_sponsorship(
    ledger: SponsorshipLedger, *, project_id: str, chain_id: int, op: UserOperation, at: datetime
) -> UsageRecord:
    """Release a sponsored op's hold: its window passed, or it was dropped, unmined."""
    return await ledger.release(project_id, sponsorship_key(chain_id, op), at)
