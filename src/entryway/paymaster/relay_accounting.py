"""Recording what an accepted UserOperation costs: one unit of work per op.

When the bundler accepts an op sent through the service, three things must happen together:
the project is charged the relay (a usage event drawing on its lots; for an op paying its own
gas that deploys a wallet, changes its guardians or takes a recovery step, with those
operations' service fees: `costs.relay_quote`), and, when the service's
paymaster sponsors the op, the sponsorship hold made at signing is linked to the op's hash and
a durable task is queued to settle that hold from the receipt. Written separately, a failure
between them leaves a hold linked to an op nobody will ever settle (held forever), or an op
bundled that was never charged. So they are handed to the ledger as one `AcceptedOp` and
commit in one database transaction (`AcceptedOpLedger.record_accepted_op`).

Why not the meter's `charge`: it batches the charges of concurrent requests into one
transaction of their own (group commit), which cannot also carry this op's link and task, and
retries a failed batch charge by charge. The relay charge is written here instead, and the
meter is only told afterwards (`on_charged`) so the project's credit alerts are looked at.

Callers run this before the op enters the mempool (`Bundler.send`'s `before_mempool`): if it
fails, the op is refused and nothing is bundled unaccounted. Recording the same op again (a
client retrying the send) charges nothing more: the usage key, the link and the task's key are
all per (chain, op hash).

The op itself is written to the durable intake (every accepted op's one path) in the
same transaction (`bundler.intake`), for the chain's bundler leader: an op whose hash was
returned is accounted and durable, or neither.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from entryway.bundler.intake import IntakeAdmission, admitting
from entryway.domain.pricebook import PriceBook
from entryway.domain.userop import UserOperation
from entryway.paymaster.costs import CreditsCounted, relay_quote, sponsorship_key
from entryway.paymaster.ports import (
    AcceptedOp,
    AcceptedOpLedger,
    IntakeEntry,
    SettlementTask,
    UsageRecord,
)
from entryway.paymaster.settlement import (
    SETTLE_MAX_ATTEMPTS,
    SETTLE_POLL_SECONDS,
    SETTLE_TASK,
    SponsoredOp,
    settle_payload,
)

NO_EXPIRY = 2**48 - 1  # validUntil 0 in paymaster data: the signature never expires


def op_usage_key(chain_id: int, user_op_hash: str) -> str:
    """The idempotency key of an op's relay charge, which /op-status looks up."""
    return f"userop:{chain_id}:{user_op_hash.lower()}"


def _intake(
    entry_point: str | None, op: UserOperation, admission: IntakeAdmission | None
) -> IntakeEntry | None:
    """Where the op goes besides the ledger: the durable intake when the caller names it or
    when an intake bundler is admitting it right now (`bundler.intake.admitting`)."""
    if entry_point is None and admission is not None:
        entry_point = admission.entry_point
    if entry_point is None:
        return None
    if admission is None:
        return IntakeEntry(entry_point, op)
    return IntakeEntry(entry_point, op, admission.validation, admission.validated_block)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class RelayAccounting:
    def __init__(
        self,
        ledger: AcceptedOpLedger,
        prices: PriceBook,
        *,
        on_charged: Callable[[str], None] | None = None,
        counted: CreditsCounted | None = None,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.ledger = ledger
        self.prices = prices
        self.on_charged = on_charged  # the project's credits moved: alerts may be due
        self.counted = counted  # the credits metric, told each relay charge
        self.clock = clock

    async def record_accepted_op(
        self,
        *,
        project_id: str,
        chain_id: int,
        op: UserOperation,
        user_op_hash: str,
        service_paymaster: str | None,
        endpoint: str,
        key_id: str | None = None,
        intake_entry_point: str | None = None,
    ) -> UsageRecord:
        """Charge the relay of an accepted op and, when `service_paymaster` sponsors it, link
        its hold and queue its settlement, in one transaction. With `intake_entry_point` (the
        chain's ops go through the durable intake) the op is written to the intake in that
        transaction too, for the chain's bundler leader."""
        op_hash = user_op_hash.lower()
        sponsored = (
            service_paymaster is not None
            and (op.paymaster or "").lower() == service_paymaster.lower()
        )
        relay = relay_quote(self.prices, chain_id, op, sponsored=sponsored)
        now = self.clock()
        settlement = None
        if sponsored:
            valid_until = int.from_bytes(op.paymaster_data[:6], "big") or NO_EXPIRY
            followed = SponsoredOp(project_id, chain_id, op_hash, op, valid_until)
            settlement = SettlementTask(
                hold_key=sponsorship_key(chain_id, op),
                kind=SETTLE_TASK,
                payload=settle_payload(followed),
                run_at=now + timedelta(seconds=SETTLE_POLL_SECONDS),
                idempotency_key=f"{chain_id}:{op_hash}",
                max_attempts=SETTLE_MAX_ATTEMPTS,
            )
        admission = admitting.get()
        intake = _intake(intake_entry_point, op, admission)
        record = await self.ledger.record_accepted_op(
            AcceptedOp(
                project_id=project_id,
                usage_key=op_usage_key(chain_id, op_hash),
                user_op_hash=op_hash,
                relay=relay,
                at=now,
                key_id=key_id,
                endpoint=endpoint,
                chain_id=chain_id,
                sender=op.sender,
                settlement=settlement,
                intake=intake,
            )
        )
        if intake is not None and admission is not None:
            admission.written = True  # the intake bundler need not look it up
        if not record.duplicate:
            if self.on_charged is not None:
                self.on_charged(project_id)
            if self.counted is not None:
                self.counted(relay.operation.value, record.credits)
        return record
