"""What a UserOperation does to an Entryway smart wallet, for the price book (requirements
§8.3): deploying it, changing its guardians, or a step of its recovery. Pure. The charges are
the same whoever pays the gas: a sponsored op carries them in its sponsorship quote, an op
that pays its own gas in its relay charge (`paymaster.costs.relay_quote`).

How SmartAccount is reached (contracts/SmartAccount.sol):

- deployment: the op carries a factory (initCode); an EIP-7702 marker is no deployment;
- guardian management (`addGuardian`, `removeGuardian`, `setGuardianThreshold`) is `onlySelf`:
  the owner-signed op calls `execute(self, 0, data)` or `executeBatch` with calls to itself.
  A top-level `addGuardian` call comes from the EntryPoint and reverts (`NotSelf`), so it is
  no guardian change and is not charged as one;
- `startRecovery(newOwner, approvals)` and `finalizeRecovery()` are the op's own call data
  (validated by the guardians' approvals, and by the pending recovery's delay), or calls the
  account makes to itself; `cancelRecovery()` is the owner's call through `execute` to itself.

Each guardian change is one owner-authorised change: one verification step (the owner's
signature). A recovery start counts one guardian confirmation per approval it carries.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from eth_abi.abi import decode

from entryway.domain.eip7702 import MARKER
from entryway.domain.evm import keccak
from entryway.domain.pricebook import OperationType, PriceBook, Quote
from entryway.domain.userop import UserOperation


def _selector(signature: str) -> bytes:
    return keccak(signature.encode())[:4]


EXECUTE = _selector("execute(address,uint256,bytes)")
EXECUTE_BATCH = _selector("executeBatch((address,uint256,bytes)[])")
ADD_GUARDIAN = _selector("addGuardian(address)")
REMOVE_GUARDIAN = _selector("removeGuardian(address)")
SET_GUARDIAN_THRESHOLD = _selector("setGuardianThreshold(uint32)")
START_RECOVERY = _selector("startRecovery(address,bytes[])")
FINALIZE_RECOVERY = _selector("finalizeRecovery()")
CANCEL_RECOVERY = _selector("cancelRecovery()")
GUARDIAN_CHANGES = frozenset({ADD_GUARDIAN, REMOVE_GUARDIAN, SET_GUARDIAN_THRESHOLD})
OWNER_SIGNATURES = 1  # what authorises a guardian change: the owner's signature on the op


class WalletChargeKind(StrEnum):
    ACCOUNT_CREATION = "account_creation"
    GUARDIAN_MANAGEMENT = "guardian_management"
    RECOVERY = "recovery"


@dataclass(frozen=True, slots=True)
class WalletCharge:
    """One charge: `verification_steps` are signatures checked (guardian management) or
    guardian confirmations (recovery); 0 for a deployment."""

    kind: WalletChargeKind
    verification_steps: int = 0


def classify(op: UserOperation) -> tuple[WalletCharge, ...]:
    """The wallet charges of `op`, in call order, the deployment first."""
    charges: list[WalletCharge] = []
    if op.factory is not None and op.factory.lower() != MARKER.lower():
        charges.append(WalletCharge(WalletChargeKind.ACCOUNT_CREATION))
    top = _top_level(op.call_data)
    if top is not None:
        charges.append(top)
    charges.extend(c for c in map(_self_call, _self_calls(op)) if c is not None)
    return tuple(charges)


def wallet_operation(charges: Sequence[WalletCharge]) -> OperationType | None:
    """What usage shows an op carrying `charges` as: its first charge's operation type (the
    deployment, when it deploys), or None for an op that is no wallet operation."""
    return OperationType(charges[0].kind.value) if charges else None


def _top_level(call_data: bytes) -> WalletCharge | None:
    """The recovery steps the account validates without the owner: the op's own call data."""
    selector = call_data[:4]
    if selector == START_RECOVERY:
        approvals = _approvals(call_data[4:])
        return None if approvals is None else _recovery(approvals)
    if selector == FINALIZE_RECOVERY:
        return _recovery(0)
    return None


def _self_call(data: bytes) -> WalletCharge | None:
    selector = data[:4]
    if selector in GUARDIAN_CHANGES:
        return WalletCharge(WalletChargeKind.GUARDIAN_MANAGEMENT, OWNER_SIGNATURES)
    if selector in (FINALIZE_RECOVERY, CANCEL_RECOVERY):
        return _recovery(0)
    if selector == START_RECOVERY:
        approvals = _approvals(data[4:])
        return None if approvals is None else _recovery(approvals)
    return None


def _recovery(confirmations: int) -> WalletCharge:
    return WalletCharge(WalletChargeKind.RECOVERY, confirmations)


def _approvals(args: bytes) -> int | None:
    try:
        _, approvals = decode(["address", "bytes[]"], args)
    except Exception:  # malformed ABI: the account refuses the op, nothing to charge
        return None
    return len(approvals)


def _self_calls(op: UserOperation) -> Iterable[bytes]:
    """The data of each call the account makes to itself through execute / executeBatch."""
    selector, args = op.call_data[:4], op.call_data[4:]
    try:
        if selector == EXECUTE:
            target, _, data = decode(["address", "uint256", "bytes"], args)
            calls: Sequence[tuple[str, int, bytes]] = [(target, 0, data)]
        elif selector == EXECUTE_BATCH:
            (calls,) = decode(["(address,uint256,bytes)[]"], args)
        else:
            return ()
    except Exception:  # malformed ABI: the op reverts, its calls never happen
        return ()
    sender = op.sender.lower()
    return [bytes(data) for target, _, data in calls if str(target).lower() == sender]


def charge_quote(prices: PriceBook, chain_id: int, charge: WalletCharge) -> Quote:
    """A charge's price without gas: the sponsored op it rides in pays the gas once."""
    if charge.kind is WalletChargeKind.ACCOUNT_CREATION:
        return prices.account_creation_quote(chain_id, 0)
    if charge.kind is WalletChargeKind.GUARDIAN_MANAGEMENT:
        return prices.guardian_management(
            chain_id, verification_steps=charge.verification_steps, gas_cost_wei=0
        )
    return prices.recovery_quote(
        chain_id, guardian_confirmations=charge.verification_steps, gas_cost_wei=0
    )


def charge_components(
    prices: PriceBook, chain_id: int, charges: Iterable[WalletCharge]
) -> tuple[tuple[str, int], ...]:
    """Credits per charge kind (several changes of one kind add up), in first-seen order."""
    totals: dict[str, int] = {}
    for charge in charges:
        credits = charge_quote(prices, chain_id, charge).credits
        totals[charge.kind.value] = totals.get(charge.kind.value, 0) + credits
    return tuple(totals.items())


def with_wallet_charges(
    quote: Quote, prices: PriceBook, chain_id: int, charges: Iterable[WalletCharge]
) -> Quote:
    """`quote` with the wallet charges added as components; the total stays their exact sum."""
    extra = charge_components(prices, chain_id, charges)
    if not extra:
        return quote
    breakdown = quote.breakdown + extra
    return Quote(quote.operation, sum(c for _, c in breakdown), breakdown)
