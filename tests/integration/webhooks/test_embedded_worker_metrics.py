"""`entryway up` with its worker in process: a webhook delivery that fails there is counted on
the same process's /metrics (`entryway_webhook_delivery_failures_total`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from entryway.devnet.anvil import free_port
from tests.integration.webhooks.support import Receiver
from tests.running import start, stop


def delivery_failures(exposition: str) -> dict[str, float]:
    return {
        s.labels["outcome"]: s.value
        for family in text_string_to_metric_families(exposition)
        if family.name == "entryway_webhook_delivery_failures"
        for s in family.samples
        if s.name.endswith("_total")
    }


async def test_a_failed_delivery_in_the_embedded_worker_shows_on_metrics(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # The receiver listens on loopback: the operator allows private destinations.
    proc = await start(
        tmp_path, port, "--chains", "84532", env={"ENTRYWAY_WEBHOOK_ALLOW_PRIVATE": "true"}
    )
    try:
        demo = json.loads((tmp_path / "demo.json").read_text())
        admin = {"Authorization": f"Bearer {demo['apiKey']}"}
        async with (
            Receiver(answers=[500], default=500) as receiver,
            httpx.AsyncClient(base_url=url, headers=admin) as http,
        ):
            made = await http.post(
                "/v1/webhooks/endpoints",
                json={"url": receiver.url, "eventTypes": ["userop.included"]},
            )
            assert made.status_code == 201, made.text
            sent = await http.post(f"/v1/webhooks/endpoints/{made.json()['id']}/test")
            assert sent.status_code == 202, sent.text
            failures: dict[str, float] = {}
            for _ in range(200):
                scraped = await http.get("/metrics")  # from this host: no token needed
                assert scraped.status_code == 200, scraped.text
                failures = delivery_failures(scraped.text)
                if failures:
                    break
                await asyncio.sleep(0.1)
            assert receiver.received, "the worker never attempted the delivery"
            assert failures == {"failed": 1.0}
    finally:
        await stop(proc)
