"""The sponsorship use case: pick the project's policy, read what it has paid for so far,
evaluate the op against it, and (when signing) hold the op's estimated cost — refused, as
rule `budget_exceeded`, only when it would take the cycle's overage past the spending budget
the project's owner chose.

Caps are checked and the hold written under one lock per project, so two requests in this
process cannot both pass the last unit of a cap. Several API processes share no lock: each
may let one op through past a cap at the same instant (documented in docs/paymaster.md).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from entryway.domain.credits import BudgetExceededError
from entryway.domain.pricebook import PriceBook, Quote
from entryway.domain.sponsorship import (
    Decision,
    Period,
    PolicyUsage,
    Rule,
    SponsorInfo,
    SponsorshipPolicy,
    SponsorshipRequest,
    choose_policy,
    evaluate,
    period_start,
)
from entryway.domain.userop import UserOperation
from entryway.errors import EntrywayError
from entryway.paymaster.calls import decode_calls
from entryway.paymaster.costs import estimated_quote, sponsorship_key
from entryway.paymaster.ports import (
    PolicySource,
    SponsorshipLedger,
    SponsorshipUsage,
    UsageRecord,
    UsageTotals,
)


class SponsorshipRefusedError(EntrywayError):
    """A policy refused the op; `decision.rule` says which rule."""

    def __init__(self, decision: Decision, policy_id: str | None) -> None:
        super().__init__(decision.message)
        self.decision = decision
        self.policy_id = policy_id


@dataclass(frozen=True, slots=True)
class SponsorshipTicket:
    """A granted sponsorship: the policy that allowed it (None: the project has none), the
    estimated cost, and the hold when one was taken."""

    policy: SponsorshipPolicy | None
    quote: Quote
    idempotency_key: str
    hold: UsageRecord | None = None

    @property
    def sponsor(self) -> SponsorInfo | None:
        return self.policy.rules.sponsor if self.policy is not None else None


@dataclass(frozen=True, slots=True)
class SponsorshipAsk:
    project_id: str
    chain_id: int
    op: UserOperation
    policy_id: str | None  # from the request's context
    at: datetime


class SponsorshipGate:
    def __init__(
        self,
        policies: PolicySource,
        usage: SponsorshipUsage,
        ledger: SponsorshipLedger,
        prices: PriceBook,
    ) -> None:
        self.policies = policies
        self.usage = usage
        self.ledger = ledger
        self.prices = prices
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def check(self, ask: SponsorshipAsk) -> SponsorshipTicket:
        """Whether the op would be sponsored now; raises SponsorshipRefusedError if not."""
        return await self._decide(ask)

    async def hold(
        self, ask: SponsorshipAsk, *, key_id: str | None, endpoint: str | None
    ) -> SponsorshipTicket:
        """Check, then charge the estimate as a hold (once per op: see costs.sponsorship_key).
        Only a policy with caps needs the project's lock: without, decisions are independent
        and concurrent holds go through side by side."""
        ticket = await self._decide(ask)
        if ticket.policy is None or not ticket.policy.rules.has_caps:
            return await self._hold(ask, ticket, key_id=key_id, endpoint=endpoint)
        async with self._locks[ask.project_id]:
            ticket = await self._decide(ask)
            return await self._hold(ask, ticket, key_id=key_id, endpoint=endpoint)

    async def _hold(
        self,
        ask: SponsorshipAsk,
        ticket: SponsorshipTicket,
        *,
        key_id: str | None,
        endpoint: str | None,
    ) -> SponsorshipTicket:
        policy_id = ticket.policy.policy_id if ticket.policy else None
        try:
            record = await self.ledger.hold(
                ask.project_id,
                ticket.idempotency_key,
                ticket.quote,
                ask.at,
                key_id=key_id,
                endpoint=endpoint,
                chain_id=ask.chain_id,
                subject=ask.op.sender,
                policy_id=policy_id,
            )
        except BudgetExceededError as exc:
            refusal = Decision.refuse(Rule.BUDGET_EXCEEDED, str(exc))
            raise SponsorshipRefusedError(refusal, policy_id) from None
        return SponsorshipTicket(ticket.policy, ticket.quote, ticket.idempotency_key, record)

    async def _decide(self, ask: SponsorshipAsk) -> SponsorshipTicket:
        quote = estimated_quote(self.prices, ask.chain_id, ask.op)
        key = sponsorship_key(ask.chain_id, ask.op)
        choice = choose_policy(await self.policies.project_policies(ask.project_id), ask.policy_id)
        if not choice.decision.allowed:
            raise SponsorshipRefusedError(choice.decision, ask.policy_id)
        policy = choice.policy
        if policy is None:
            return SponsorshipTicket(None, quote, key)
        request = SponsorshipRequest(
            sender=ask.op.sender,
            calls=decode_calls(ask.op.call_data),
            credits=quote.credits,
            at=ask.at,
        )
        usage = await self._usage(ask.project_id, policy, ask.op.sender, ask.at, key)
        decision = evaluate(policy.rules, request, usage)
        if not decision.allowed:
            raise SponsorshipRefusedError(decision, policy.policy_id)
        return SponsorshipTicket(policy, quote, key)

    async def _usage(
        self, project_id: str, policy: SponsorshipPolicy, sender: str, at: datetime, key: str
    ) -> PolicyUsage:
        """Only the counters the policy's caps need, each read once per (period, subject);
        this op's own earlier hold left out, so asking again for the same op is not refused
        for the credits it already holds."""
        read: dict[tuple[datetime | None, str | None], UsageTotals] = {}

        async def totals(period: Period, subject: str | None) -> UsageTotals:
            since = period_start(period, at)
            if (since, subject) not in read:
                read[since, subject] = await self.usage.totals(
                    project_id, policy.policy_id, since=since, subject=subject, excluding=key
                )
            return read[since, subject]

        rules = policy.rules
        spent = operations = sender_spent = sender_operations = 0
        if rules.spend_cap is not None:
            spent = (await totals(rules.spend_cap.period, None)).credits
        if rules.operation_cap is not None:
            operations = (await totals(rules.operation_cap.period, None)).operations
        if rules.sender_spend_cap is not None:
            sender_spent = (await totals(rules.sender_spend_cap.period, sender)).credits
        if rules.sender_operation_cap is not None:
            sender_operations = (await totals(rules.sender_operation_cap.period, sender)).operations
        return PolicyUsage(spent, operations, sender_spent, sender_operations)
