"""Usage pages in the browser: the live balance, the export the API gives, trends with the
forecast, and the same analytics across all of a user's projects."""

from __future__ import annotations

import asyncio
import re
import secrets
from urllib.parse import parse_qs, urlsplit

import httpx
from playwright.async_api import Browser, Page, expect

from tests.browser.conftest import DESKTOP, Service, new_project, screenshots, sign_up


def figure(text: str) -> int:
    return int(text.replace(",", ""))


async def project_key(service: Service, project_id: str) -> str:
    """A service key for the project, issued by the operator."""
    async with httpx.AsyncClient(base_url=service.url, timeout=30) as http:
        r = await http.post(
            f"/v1/admin/projects/{project_id}/keys",
            headers={"Authorization": f"Bearer {service.operator_token}"},
            json={"chains": [80002]},
        )
        assert r.status_code == 201, r.text
        return str(r.json()["apiKey"])


async def notarize(service: Service, key: str, count: int = 1) -> None:
    """Credit-charging calls: notarizations of random hashes."""
    async with httpx.AsyncClient(base_url=service.url, timeout=30) as http:
        for _ in range(count):
            body = {"chainId": 80002, "documentHash": "0x" + secrets.token_hex(32)}
            r = await http.post(
                "/v1/notarizations", headers={"Authorization": f"Bearer {key}"}, json=body
            )
            assert r.status_code == 202, r.text


async def project_with_usage(page: Page, service: Service, name: str) -> tuple[str, str]:
    await sign_up(page, service)
    project_id = await new_project(page, service, name, [80002])
    key = await project_key(service, project_id)
    await notarize(service, key, 2)
    return project_id, key


async def test_the_balance_updates_live_after_a_charged_call_without_a_reload(
    page: Page, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Live", [80002])
    key = await project_key(service, project_id)
    await page.goto(f"{service.dashboard}/projects/{project_id}/usage")
    live = page.locator("[data-live]")
    await expect(live).to_have_attribute("data-updated", re.compile(r"\d+"))  # connected
    balance = live.locator("[data-field=balance]")
    before = await balance.inner_text()
    used_before = await live.locator("[data-field=used_this_cycle]").inner_text()
    assert used_before == "0"
    await page.evaluate("window.stillTheSamePage = true")

    await notarize(service, key)

    await expect(balance).not_to_have_text(before, timeout=15_000)
    assert figure(await balance.inner_text()) < figure(before)
    await expect(live.locator("[data-field=used_this_cycle]")).not_to_have_text("0")
    await expect(live.locator("[data-field=per_hour]")).not_to_have_text("0")
    assert await page.evaluate("window.stillTheSamePage === true")  # no navigation happened
    await page.reload()  # the breakdowns and the trend are drawn with the page
    await screenshots(page, "usage-project")


async def test_the_dashboard_export_is_the_api_export_byte_for_byte(
    page: Page, service: Service
) -> None:
    project_id, key = await project_with_usage(page, service, "Exports")
    await page.goto(f"{service.dashboard}/projects/{project_id}/usage")
    for fmt, label in (("csv", "Export CSV"), ("json", "Export JSON")):
        href = await page.locator(f"a:has-text('{label}')").get_attribute("href")
        assert href is not None and f"format={fmt}" in href
        query = parse_qs(urlsplit(href).query)
        mine = await page.request.get(f"{service.url}{href}")
        assert mine.status == 200
        assert mine.headers["content-disposition"].startswith("attachment;")
        params = {"format": fmt, "since": query["from"][0], "until": query["to"][0]}
        async with httpx.AsyncClient(base_url=service.url, timeout=30) as http:
            theirs = await http.get(
                "/v1/usage/export", params=params, headers={"Authorization": f"Bearer {key}"}
            )
        assert theirs.status_code == 200, theirs.text
        body = await mine.body()
        assert body == theirs.content
        assert body.count(b"notarizations.hash") == 2  # the two charged calls, nothing else
        assert mine.headers["content-disposition"] == theirs.headers["content-disposition"]


async def test_trends_switch_between_days_weeks_and_months_with_a_forecast_line(
    page: Page, service: Service
) -> None:
    project_id, _ = await project_with_usage(page, service, "Trends")
    await page.goto(f"{service.dashboard}/projects/{project_id}/usage")
    chart = page.locator("svg.chart.columns")
    await expect(chart.locator("polyline.forecast")).to_have_count(1)
    assert await chart.locator("rect.bar").count() >= 1
    periods = (("Weekly", "week", r"\d{4}-W\d\d"), ("Monthly", "month", r"\d{4}-\d\d"))
    for label, grouping, pattern in periods:
        await page.click(f"nav.switch a:has-text('{label}')")
        await page.wait_for_url(f"**grouping={grouping}**")
        await expect(page.locator("nav.switch a[aria-current=page]")).to_have_text(label)
        await expect(chart.locator("polyline.forecast")).to_have_count(1)
        labels = await chart.locator("text").all_text_contents()
        assert any(re.fullmatch(pattern, t) for t in labels), labels
    breakdown = page.locator("#by-operation ~ .table-wrap, section:has(#by-operation)")
    assert "Notarization" in await breakdown.first.inner_text()
    assert await page.locator("section:has(#by-endpoint) svg.chart.bars").count() == 1
    await screenshots(page, "usage-trends-monthly")


async def test_the_cross_project_page_adds_up_every_project(page: Page, service: Service) -> None:
    await sign_up(page, service)
    first = await new_project(page, service, "Alpha", [80002])
    second = await new_project(page, service, "Beta", [80002])
    await notarize(service, await project_key(service, first), 1)
    await notarize(service, await project_key(service, second), 2)
    await page.click("nav.top-nav a:has-text('Usage')")
    await page.wait_for_url(f"{service.dashboard}/usage")
    rows = page.locator("table.list tbody tr")
    await expect(rows.filter(has_text="Alpha")).to_have_count(1)
    await expect(rows.filter(has_text="Beta")).to_have_count(1)
    alpha = figure(await rows.filter(has_text="Alpha").locator("td").nth(5).inner_text())
    beta = figure(await rows.filter(has_text="Beta").locator("td").nth(5).inner_text())
    assert beta == 2 * alpha > 0  # the same price per notarization
    total = page.locator("section:has(#by-operation) table tbody tr", has_text="notarization")
    assert figure(await total.locator("td").nth(1).inner_text()) == 3 * alpha
    await expect(page.locator("svg.chart.columns polyline.forecast")).to_have_count(1)
    await screenshots(page, "usage-all-projects")


async def test_others_cannot_stream_or_export_a_project_and_streams_are_capped(
    page: Page, browser: Browser, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Guarded", [80002])
    base = f"{service.dashboard}/projects/{project_id}/usage"
    other = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    try:
        intruder = await other.new_page()
        await sign_up(intruder, service)
        for path in ("/live", "/export?format=csv", "/export?format=json"):
            answer = await intruder.request.get(base + path)
            assert answer.status == 404, path
    finally:
        await other.close()

    cookies = {c["name"]: c["value"] for c in await page.context.cookies()}
    async with httpx.AsyncClient(timeout=10, cookies=cookies) as http:
        streams, readers = [], []
        try:
            for _ in range(4):
                stream = http.stream("GET", base + "/live")
                response = await stream.__aenter__()
                streams.append(stream)
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                lines = response.aiter_lines()
                readers.append(lines)  # held: a dropped reader closes its connection
                while "event: usage" not in await anext(lines):
                    pass
            refused = await http.get(base + "/live")
            assert refused.status_code == 429
        finally:
            for stream in streams:
                await stream.__aexit__(None, None, None)
    for _ in range(50):  # the closed streams give their slots back
        async with (
            httpx.AsyncClient(timeout=10, cookies=cookies) as http,
            http.stream("GET", base + "/live") as again,
        ):
            if again.status_code == 200:
                return
        await asyncio.sleep(0.2)
    raise AssertionError("the slots of closed streams were never given back")


async def test_a_bad_window_is_explained_and_the_page_still_shows(
    page: Page, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Windows", [80002])
    base = f"{service.dashboard}/projects/{project_id}/usage"
    answer = await page.goto(f"{base}?from=2026-12-01&to=2026-11-01")
    assert answer is not None and answer.status == 400
    assert "must come before" in await page.locator("[role=alert]").inner_text()
    assert await page.locator("[data-field=balance]").is_visible()
    export = await page.request.get(f"{base}/export?format=csv&from=1999-01-01")
    assert export.status == 400
    assert "text/csv" not in export.headers["content-type"]
