"""A sponsored op that never lands is announced as `userop.dropped` with why: the bundler
dropped it (its reason, as /op-status shows it), its validity window passed unmined, or its
hold was released because it was never sent. Once per op, however often its settlement
runs; an op still in flight announces nothing. No chain: the bundler's answers are scripted."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from entryway.bundler.port import OpStatus, OpStatusReport, Receipt, UserOpHash
from entryway.composition.events import dropped_events, op_events, unsent_events
from entryway.domain.pricebook import default_price_book
from entryway.domain.userop import UserOperation
from entryway.domain.webhooks import EventType
from entryway.paymaster.costs import estimated_quote, sponsorship_key
from entryway.paymaster.memory import InMemorySponsorships
from entryway.paymaster.settlement import (
    EXPIRED_UNMINED,
    UNSENT,
    SponsoredOp,
    SponsorshipSettler,
)
from tests.recorded_events import RecordedEvents

CHAIN = 84532
PROJECT = "drops"
PRICES = default_price_book()
OP_HASH = "0x" + "ab" * 32
SIGNED_AT = datetime(2026, 1, 5, 12, tzinfo=UTC)  # before any run of these tests
VALID_UNTIL = int(SIGNED_AT.timestamp()) + 600


class Holds(InMemorySponsorships):
    """The in-memory ledger, with the query the unsent-hold sweep makes."""

    async def unreferenced_holds(
        self, operation: str, older_than: datetime
    ) -> list[tuple[str, str]]:
        return [
            (p, k) for (p, k), e in self.events.items() if e.status == "held" and e.at < older_than
        ]


@dataclass
class ScriptedBundler:
    """A chain's bundler that reports the op as told, and has no receipt for it."""

    report: OpStatusReport
    chain_id: int = CHAIN

    async def status(self, user_op_hash: str) -> OpStatusReport:
        return self.report

    async def receipt(self, user_op_hash: str) -> Receipt | None:
        return None


def an_op(nonce: int = 0) -> UserOperation:
    return UserOperation(
        sender="0x" + "11" * 20,
        nonce=nonce,
        call_data=b"",
        call_gas_limit=100_000,
        verification_gas_limit=200_000,
        pre_verification_gas=50_000,
        max_fee_per_gas=10**9,
        max_priority_fee_per_gas=10**9,
    )


async def held(ledger: Holds, op: UserOperation) -> str:
    key = sponsorship_key(CHAIN, op)
    quote = estimated_quote(PRICES, CHAIN, op)
    await ledger.hold(
        PROJECT, key, quote, SIGNED_AT,
        key_id=None, endpoint=None, chain_id=CHAIN, subject=None, policy_id=None,
    )  # fmt: skip
    return key


def settler(
    ledger: Holds, events: RecordedEvents, report: OpStatusReport, now: float
) -> SponsorshipSettler:
    return SponsorshipSettler(
        ledger,
        PRICES,
        {CHAIN: ScriptedBundler(report)},  # type: ignore[dict-item]
        clock=lambda: now,
        on_dropped=dropped_events(events),
        on_released_unsent=unsent_events(events),
    )


async def test_an_op_the_bundler_dropped_is_announced_once_with_its_reason() -> None:
    ledger, events, op = Holds(), RecordedEvents(), an_op()
    key = await held(ledger, op)
    reason = "failed revalidation: AA25 invalid account nonce"
    dropped = OpStatusReport(OpStatus.DROPPED, None, reason)
    check = settler(ledger, events, dropped, now=SIGNED_AT.timestamp())
    sponsored = SponsoredOp(PROJECT, CHAIN, OP_HASH, op, VALID_UNTIL)

    assert await check.check(sponsored)
    assert await check.check(sponsored)  # the task ran again: nothing new

    assert ledger.events[PROJECT, key].status == "released"
    assert events.of(EventType.USEROP_DROPPED) == [
        (
            PROJECT,
            {
                "chainId": CHAIN,
                "userOpHash": OP_HASH,
                "sender": op.sender,
                "nonce": "0x0",
                "reason": reason,
            },
        )
    ]


async def test_an_op_unmined_past_its_window_is_announced_as_expired() -> None:
    ledger, events, op = Holds(), RecordedEvents(), an_op()
    await held(ledger, op)
    unknown = OpStatusReport(OpStatus.NOT_FOUND)
    sponsored = SponsoredOp(PROJECT, CHAIN, OP_HASH, op, VALID_UNTIL)

    # Still within its window: it may yet be mined, so nothing is said.
    assert not await settler(ledger, events, unknown, now=VALID_UNTIL - 1).check(sponsored)
    assert events.of(EventType.USEROP_DROPPED) == []

    late = VALID_UNTIL + 3_600
    assert await settler(ledger, events, unknown, now=late).check(sponsored)
    [(project, data)] = events.of(EventType.USEROP_DROPPED)
    assert project == PROJECT
    assert data["userOpHash"] == OP_HASH
    assert data["reason"] == EXPIRED_UNMINED


async def test_an_op_in_flight_is_not_announced() -> None:
    ledger, events, op = Holds(), RecordedEvents(), an_op()
    key = await held(ledger, op)
    submitted = OpStatusReport(OpStatus.SUBMITTED, "0x" + "cd" * 32)
    sponsored = SponsoredOp(PROJECT, CHAIN, OP_HASH, op, VALID_UNTIL)
    assert not await settler(ledger, events, submitted, now=VALID_UNTIL - 1).check(sponsored)
    assert ledger.events[PROJECT, key].status == "held"
    assert events.emitted == {}
    assert events.unkeyed == []


async def test_a_hold_released_unsent_is_announced_with_its_hold() -> None:
    ledger, events = Holds(), RecordedEvents()
    key = await held(ledger, an_op(nonce=7))
    sweeper = settler(ledger, events, OpStatusReport(OpStatus.NOT_FOUND), now=0)
    sweeper.unsent_after = timedelta(0)  # every hold made before now is past its window

    assert await sweeper.sweep() == 1
    assert await sweeper.sweep() == 0

    assert ledger.events[PROJECT, key].status == "released"
    assert events.of(EventType.USEROP_DROPPED) == [
        (
            PROJECT,
            {"chainId": CHAIN, "userOpHash": None, "sponsorshipKey": key, "reason": UNSENT},
        )
    ]


async def test_an_included_op_is_announced_with_its_entry_point_and_receipt_figures() -> None:
    """Whichever EntryPoint carried the op (v0.7 here), userop.included names it, with the
    nonce, success and gas the receipt gives."""
    events = RecordedEvents()
    op = an_op(nonce=5)
    sponsored = SponsoredOp("p1", 80002, "0x" + "ab" * 32, op, valid_until=0)
    v07 = "0x0000000071727De22E5E9d8BAf0edAc6f37da032"
    receipt = Receipt(
        user_op_hash=UserOpHash("0x" + "ab" * 32),
        sender=op.sender,
        success=True,
        actual_gas_cost=123_000,
        actual_gas_used=61_500,
        transaction_hash="0x" + "cd" * 32,
        block_number=9,
        entry_point=v07,
    )
    await op_events(events)(sponsored, receipt)
    [(project, data)] = events.of(EventType.USEROP_INCLUDED)
    assert project == "p1" and data["entryPoint"] == v07
    assert data["nonce"] == "0x5" and data["success"] is True
    assert (data["actualGasCost"], data["actualGasUsed"]) == (hex(123_000), hex(61_500))
