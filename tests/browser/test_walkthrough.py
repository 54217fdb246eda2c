"""What a walk through the dashboard found, held fixed: the project page's members, checklist,
tabs and chain names; the plans and billing pages' wording and choice; and the usage page's
chart and breakdowns kept with its live tiles, readable on a phone."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

from playwright.async_api import Page, expect

from tests.browser.conftest import DESKTOP, PHONE, Service, new_email, new_project, sign_up
from tests.browser.layout import assert_fits
from tests.browser.test_usage import notarize, project_key

LONG_NAME = "Quarterly settlement reconciliation for the northern region's merchant payouts"


async def test_the_project_page_fits_offers_no_dead_end_and_ticks_a_one_chain_project(
    page: Page, service: Service
) -> None:
    await sign_up(page, service, new_email("averyveryverylongaddressthatneverbreaksonaphone"))
    project_id = await new_project(page, service, LONG_NAME, [80002])
    await page.goto(f"{service.dashboard}/projects/{project_id}")

    step = page.locator(".checklist li", has_text="Add the chain IDs")
    assert await step.get_attribute("class") == "done"  # one chain is the chains it wants
    members = page.locator("table.members")
    assert await members.locator("button:has-text('Leave')").count() == 0  # it would fail
    assert "sole owner" in await members.inner_text()
    label = page.locator("label.check", has=page.locator("input[value='80002']"))
    assert "Polygon Amoy" in await label.inner_text()
    assert "polygon-amoy" not in await page.locator("main").inner_text()
    assert "SAWarning" not in service.log_text()  # the checklist's query among others

    for size in (DESKTOP, PHONE):
        await page.set_viewport_size(size)  # type: ignore[arg-type]
        await assert_fits(page)  # the members table's long email included
        tabs = await page.locator(".project-nav .tabs a").all()
        tops = {round((await t.bounding_box() or {"y": -1})["y"]) for t in tabs}
        assert len(tabs) >= 7 and len(tops) == 1, (size, tops)  # one row, whatever the name
        name = page.locator(".project-nav .project-name")
        assert await name.get_attribute("title") == LONG_NAME


async def test_plans_say_sla_and_a_plan_request_keeps_its_choice_and_counts_in_words(
    page: Page, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Wording", [80002])
    await page.goto(f"{service.dashboard}/plans")
    support = await page.locator("#plans tr[data-plan=ENTERPRISE] td").nth(3).inner_text()
    assert support == "SLA and dedicated account manager"

    billing = f"{service.dashboard}/projects/{project_id}/billing"
    await page.goto(billing)
    await page.check("#plan-form input[value=PRO]")
    await page.click("#plan-form button[type=submit]")
    await page.wait_for_url(f"{billing}?done=requested")
    assert await page.locator("#plan-form input[value=PRO]").is_checked()
    assert not await page.locator("#plan-form input[value=FREE]").is_checked()
    assert "1 request waiting" in await page.locator("main").inner_text()
    assert "(s)" not in await page.locator("main").inner_text()


async def test_usage_chart_and_breakdowns_follow_the_live_tiles_in_plain_names(
    page: Page, service: Service
) -> None:
    await page.set_viewport_size(PHONE)  # type: ignore[arg-type]
    await sign_up(page, service)
    project_id = await new_project(page, service, "Following", [80002])
    key = await project_key(service, project_id)
    before = datetime.now(UTC)
    await page.goto(f"{service.dashboard}/projects/{project_id}/usage")
    after = datetime.now(UTC)

    empty = page.locator("#trend svg.chart")
    assert "No usage in these periods yet." in (await empty.text_content() or "")  # not a bare axis
    assert await page.locator("#breakdowns .empty").count() == 3  # by type, by endpoint, by key
    await assert_fits(page)

    href = await page.locator("a:has-text('Export CSV')").get_attribute("href")
    assert href is not None
    query = parse_qs(urlsplit(href).query)
    since = datetime.fromisoformat(query["from"][0])
    until = datetime.fromisoformat(query["to"][0])
    assert before - timedelta(seconds=1) <= until <= after  # up to now, as the API's default
    assert until - since == timedelta(days=30)
    for field in ("from", "to"):  # dates typed as ISO 8601, never mm/dd/yyyy
        box = page.locator(f".usage-window input[name={field}]")
        assert await box.get_attribute("type") == "text"
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", await box.input_value())

    live = page.locator("[data-live]")
    await expect(live).to_have_attribute("data-updated", re.compile(r"\d+"))  # connected
    await page.evaluate("window.stillTheSamePage = true")
    await notarize(service, key)
    await expect(live.locator("[data-field=used_this_cycle]")).not_to_have_text("0")
    breakdowns = page.locator("#breakdowns")
    await expect(breakdowns.locator(".empty")).to_have_count(0, timeout=15_000)
    await expect(page.locator("#trend rect.bar")).not_to_have_count(0)
    assert await page.evaluate("window.stillTheSamePage === true")  # no reload

    shown = await breakdowns.inner_text()
    assert "Notarization" in shown or "Notarize" in shown, shown
    assert not re.search(r"\b[a-z]+_[a-z_]+\b", shown.split("By API endpoint")[0]), shown
    assert "rpc:" not in shown and "wallets:" not in shown
    heights = await page.evaluate(
        """() => [...document.querySelectorAll('#trend svg.chart text:not(.minor)')]
              .filter(t => getComputedStyle(t).display !== 'none')
              .map(t => t.getBoundingClientRect().height)"""
    )
    assert heights and min(heights) >= 12, heights  # readable on a phone
    await assert_fits(page)
