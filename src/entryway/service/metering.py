"""Metering: every API call is counted, every priced operation charged, in credits.

Free reads (the read-only endpoints; 0 credits by default) are counted in memory per key,
endpoint, chain and UTC day and written in one upsert per second (and at shutdown): the
request path never waits for the database. When reads are priced, each flush also charges
the project once for the reads it writes, under the flush's own idempotency key.
Priced operations are charged synchronously through the ledger, one idempotent usage event
each, and may raise the low-balance and overage alerts (once per cycle each)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from entryway.domain.billing import low_balance_threshold
from entryway.domain.plans import plan
from entryway.domain.pricebook import PriceBook, Quote
from entryway.storage.billing import Billing
from entryway.storage.ledger import Charge, UsageContext, UsageRecord
from entryway.storage.store import Caller, Store
from entryway.storage.usage import RequestCountKey, UsageQueries

log = logging.getLogger(__name__)
FLUSH_SECONDS = 1.0
ALERT_CHECK_SECONDS = 1.0  # a project's alert conditions are looked at this often at most
GROUP_COMMIT_MAX = 200  # charges written in one transaction at most
AlertHook = Callable[[str, str, dict[str, object]], Awaitable[None]]  # project, kind, data


class Meter:
    def __init__(
        self,
        store: Store,
        billing: Billing,
        prices: PriceBook,
        *,
        enabled: bool = True,
        on_alert: AlertHook | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self.billing = billing
        self.usage = UsageQueries(store.engine)
        self.prices = prices
        self.enabled = enabled
        self.on_alert = on_alert
        self.clock = clock
        self._counts: dict[RequestCountKey, int] = defaultdict(int)
        self.credits_charged: dict[str, int] = defaultdict(int)  # by operation, for metrics
        self._next_alert_check: dict[str, float] = {}
        self._alerts_due: set[str] = set()
        self._alerts_failing: set[str] = set()
        self._waiting: list[tuple[Charge, asyncio.Future[UsageRecord]]] = []
        self._committer: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None

    # ---------------------------------------------------------------- reads

    def count_read(self, who: Caller, endpoint: str, chain_id: int | None = None) -> None:
        if self.enabled:
            day = f"{self.clock():%Y-%m-%d}"
            self._counts[
                RequestCountKey(who.project_id, who.key_id, endpoint, chain_id or 0, day)
            ] += 1

    async def flush(self) -> None:
        await self.check_due_alerts()
        counts, self._counts = self._counts, defaultdict(int)
        if not counts:
            return
        price = self.prices.read_query().credits
        if price:
            per_project: dict[str, int] = defaultdict(int)
            for key, n in counts.items():
                per_project[key.project_id] += n * price
            now = self.clock()
            for project_id, credits in per_project.items():
                await self.store.ledger.record_usage(
                    project_id, f"reads:{uuid.uuid4()}", "read", credits, now
                )
                self.counted("read", credits)
        try:
            await self.usage.add_request_counts({k: (n, n * price) for k, n in counts.items()})
        except Exception:
            for key, n in counts.items():  # keep them for the next flush
                self._counts[key] += n
            raise

    async def start(self) -> None:
        self._task = asyncio.create_task(self._flush_forever())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.flush()

    async def _flush_forever(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            with contextlib.suppress(Exception):
                await self.flush()

    # ------------------------------------------------------------- charges

    async def charge(
        self,
        who: Caller,
        quote: Quote,
        idempotency_key: str,
        *,
        endpoint: str,
        chain_id: int | None = None,
        subject: str | None = None,
        reference: str | None = None,
    ) -> UsageRecord:
        """Charge a priced operation once per idempotency key (scoped to the project).

        Group commit: charges arriving while one is being written wait for it and are then
        written together in one transaction, so concurrent requests share the commit's cost
        and none waits longer than one commit for its turn."""
        ctx = UsageContext(who.key_id, endpoint, chain_id, subject, reference=reference)
        charge = Charge(
            who.project_id,
            idempotency_key,
            quote.operation.value,
            quote.credits,
            self.clock(),
            ctx,
            quote,
        )
        record = await self._group_commit(charge)
        if not record.duplicate:
            self.counted(quote.operation.value, quote.credits)
            now = time.monotonic()
            if self._next_alert_check.get(who.project_id, 0.0) <= now:
                self._next_alert_check[who.project_id] = now + ALERT_CHECK_SECONDS
                self._alerts_due.discard(who.project_id)
                await self.check_alerts(who.project_id)
            else:
                self._alerts_due.add(who.project_id)  # looked at by the next flush
        return record

    def counted(self, operation: str, credits: int) -> None:
        """Credits charged, by operation kind, for /metrics; charges made outside the meter
        (sponsorship settlements, relayed ops) are counted by calling this too."""
        self.credits_charged[operation] += credits

    async def _group_commit(self, charge: Charge) -> UsageRecord:
        done: asyncio.Future[UsageRecord] = asyncio.get_running_loop().create_future()
        self._waiting.append((charge, done))
        if self._committer is None or self._committer.done():
            # Its own task: a caller that goes away does not stop the others' commit.
            self._committer = asyncio.create_task(self._commit_waiting())
        return await done

    async def _commit_waiting(self) -> None:
        while self._waiting:
            batch = self._waiting[:GROUP_COMMIT_MAX]
            del self._waiting[:GROUP_COMMIT_MAX]
            try:
                records = await self.store.ledger.record_many([c for c, _ in batch])
            except Exception as exc:
                for _, waiter in batch:
                    if not waiter.done():
                        waiter.set_exception(exc)
            else:
                for (_, waiter), record in zip(batch, records, strict=True):
                    if not waiter.done():
                        waiter.set_result(record)

    def alerts_may_be_due(self, project_id: str) -> None:
        """Credits moved outside `charge` (a sponsorship hold): the next flush looks at the
        project's alerts."""
        if self.enabled:
            self._alerts_due.add(project_id)

    async def check_due_alerts(self) -> None:
        """The alert checks that charges in quick succession put off, each project on its
        own: one that fails is logged and looked at again by the next flush."""
        due, self._alerts_due = self._alerts_due, set()
        for project_id in due:
            try:
                await self.check_alerts(project_id)
            except Exception:
                if project_id not in self._alerts_failing:  # logged once while it fails
                    log.exception("checking the credit alerts of project %s failed", project_id)
                self._alerts_failing.add(project_id)
                self._alerts_due.add(project_id)
            else:
                self._alerts_failing.discard(project_id)

    async def check_alerts(self, project_id: str) -> list[str]:
        """Raise credits.low / credits.overage / credits.budget for the current cycle when
        they apply."""
        now = self.clock()
        project = await self.store.project(project_id)
        balance = (await self.store.credit_account(project_id)).balance(now)
        raised: list[str] = []
        config = self.billing.config_for(project)
        threshold = low_balance_threshold(plan(project.plan), config, project.low_balance_credits)
        overage, budget = project.cycle_overage, project.overage_budget
        checks = {
            "credits.low": (balance < threshold, {"balance": balance, "threshold": threshold}),
            "credits.overage": (overage > 0, {"overage": overage}),
            "credits.budget": (
                config.budget_alert_due(overage, budget),
                {"overage": overage, "budget": budget or 0, "percent": config.budget_alert_percent},
            ),
        }
        for kind, (due, data) in checks.items():
            if due and await self.billing.raise_alert(
                project_id, kind, project.cycle_started_at, _detail(kind, data), now
            ):
                raised.append(kind)
                if self.on_alert is not None:
                    await self.on_alert(project_id, kind, dict(data))
        return raised


def _detail(kind: str, data: dict[str, int]) -> str:
    if kind == "credits.low":
        return f"balance {data['balance']} credits is under {data['threshold']}"
    if kind == "credits.budget":
        return (
            f"{data['overage']} credits over the allowance this cycle: at least "
            f"{data['percent']}% of the spending budget of {data['budget']}; past it, "
            f"sponsorship is refused"
        )
    return f"{data['overage']} credits over the allowance this cycle (billed at cycle end)"
