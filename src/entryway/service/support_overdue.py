"""Overdue support requests: open past their level's response target. Each is logged once,
at WARNING (`support request overdue: <id> …`), by whichever process first sees it: the watch loop
of a serving process, a /metrics scrape or the operator's support queue. Log alerting on
that message is how an operator is told at once; the queue marks them and the
`entryway_support_overdue` gauge counts them."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from entryway.domain.plans import SupportLevel
from entryway.domain.support import ResponseTargets
from entryway.storage.support import SupportRequest, SupportRequests

log = logging.getLogger(__name__)
WATCH_SECONDS = 60.0


async def overdue_requests(
    requests: SupportRequests, targets: ResponseTargets, now: datetime
) -> list[SupportRequest]:
    """The open requests past their target, in queue order; those not noted before are noted
    and logged now (once, whichever process gets there first)."""
    overdue = await requests.open_filed_before(targets.filed_before(now))
    for r in overdue:
        if r.overdue_noted_at is None and await requests.note_overdue(r.request_id, now):
            due = targets.due_at(r.level, r.created_at)
            log.warning(
                "support request overdue: %s (%s support) filed %s, due %s, unanswered",
                r.request_id,
                r.level.value,
                r.created_at.isoformat(timespec="minutes"),
                due.isoformat(timespec="minutes"),
            )
    return overdue


def overdue_family(overdue: list[SupportRequest]) -> Metric:
    gauge = GaugeMetricFamily(
        "entryway_support_overdue",
        "Open support requests past their level's response target, by support level.",
        labels=("level",),
    )
    for level in SupportLevel:
        gauge.add_metric((level.value,), sum(1 for r in overdue if r.level is level))
    return gauge


async def watch_overdue_forever(requests: SupportRequests, targets: ResponseTargets) -> None:
    """Note overdue requests as they fall due, so the alert does not wait for a scrape."""
    while True:
        try:
            await overdue_requests(requests, targets, datetime.now(UTC))
        except Exception:
            log.exception("reading overdue support requests failed; retrying")
        await asyncio.sleep(WATCH_SECONDS)
