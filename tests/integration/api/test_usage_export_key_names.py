"""The usage export names each event's key: `keyName` beside `keyId`, in CSV and JSON, as
the key is named now (empty for an unnamed key)."""

from __future__ import annotations

import csv
import io

from entryway.domain.pricebook import OperationType, Quote
from tests.integration.api.conftest import Api


async def test_the_usage_export_names_each_events_key(api: Api) -> None:
    who = await api.services.store.authenticate(api.key)
    meter = api.services.platform.meter
    await meter.charge(who, Quote.of(OperationType.NOTARIZATION, service=10), "n-1", endpoint="t")
    keys = api.services.store.api_keys
    await keys.change(api.project_id, who.key_id, name="CI")

    r = await api.client.get("/v1/usage/export?format=csv", headers=api.auth())
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [(x["keyId"], x["keyName"]) for x in rows] == [(who.key_id, "CI")]
    assert r.text.splitlines()[0].startswith("eventId,createdAt,operation,credits,overage,")
    r = await api.client.get("/v1/usage/export?format=json", headers=api.auth())
    assert [(e["keyId"], e["keyName"]) for e in r.json()] == [(who.key_id, "CI")]

    await keys.change(api.project_id, who.key_id, name="")
    r = await api.client.get("/v1/usage/export?format=json", headers=api.auth())
    assert [e["keyName"] for e in r.json()] == [None]
