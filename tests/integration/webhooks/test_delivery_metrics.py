"""Webhook delivery attempts that do not deliver are counted for /metrics, by outcome, through
the delivery handler's failure hook (on SQLite and PostgreSQL, a real receiver)."""

from __future__ import annotations

from typing import cast

from prometheus_client.parser import text_string_to_metric_families

from entryway.domain.webhooks import EventType
from entryway.observability.metrics import ServiceMetrics
from entryway.storage.webhooks import DELIVERY_TASK
from entryway.worker.delivery import WebhookDeliveryHandler
from tests.integration.webhooks.support import Receiver
from tests.integration.webhooks.test_delivery import INCLUDED, Rig, rig  # noqa: F401 - fixture


def failures(metrics: ServiceMetrics) -> dict[str, float]:
    text = metrics.render(()).decode()
    return {
        s.labels["outcome"]: s.value
        for f in text_string_to_metric_families(text)
        if f.name == "entryway_webhook_delivery_failures"
        for s in f.samples
        if s.name.endswith("_total")
    }


async def test_failed_and_gone_attempts_are_counted_by_outcome(rig: Rig) -> None:  # noqa: F811
    metrics = ServiceMetrics()
    handler = cast(WebhookDeliveryHandler, rig.worker.handlers[DELIVERY_TASK])
    handler.on_failure = metrics.webhook_delivery_failed
    async with Receiver(answers=[500, 204, 410]) as receiver:
        await rig.endpoint(receiver.url)
        await rig.webhooks.emit(EventType.USEROP_INCLUDED, rig.project_id, INCLUDED)
        assert await rig.worker.drain() == 1  # 500: failed, retried later
        assert await rig.run_after(60) == 1  # 204: delivered, not counted
        await rig.webhooks.emit(EventType.USEROP_INCLUDED, rig.project_id, INCLUDED)
        assert await rig.worker.drain() == 1  # 410: gone
    assert failures(metrics) == {"failed": 1.0, "gone": 1.0}
