"""Plan and billing in the browser: a dearer plan or a credit pack waits for the operator,
never takes effect on a project key alone; the operator approves or rejects on the approvals
page; the plans page; a project's ENTERPRISE terms; the owner's spending budget."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
from playwright.async_api import Browser, Page

from entryway.domain.credits import add_months
from tests.browser.conftest import DESKTOP, Service, new_project, screenshots, sign_up


async def operator_page(browser: Browser, service: Service) -> Page:
    """A new browser context signed in as the operator."""
    context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    page = await context.new_page()
    await page.goto(f"{service.dashboard}/operator/signin")
    await page.fill("input[name=token]", service.operator_token)
    await page.click("main button[type=submit]")
    await page.wait_for_url(f"{service.dashboard}/operator")
    return page


async def decide(page: Page, service: Service, project: str, what: str, note: str = "") -> None:
    """On the approvals page, approve or reject the request waiting for `project`."""
    await page.goto(f"{service.dashboard}/operator/approvals")
    row = page.locator("#pending tr", has=page.locator(f"a[href$='/projects/{project}/billing']"))
    assert await row.count() == 1
    if note:
        await row.locator("input[name=note]").fill(note)
    await row.locator(f"button:has-text('{what}')").click()
    await page.wait_for_url(f"{service.dashboard}/operator/approvals?done=*")


async def admin_key(service: Service, project_id: str) -> str:
    async with httpx.AsyncClient(base_url=service.url) as http:
        r = await http.post(
            f"/v1/admin/projects/{project_id}/keys",
            headers={"Authorization": f"Bearer {service.operator_token}"},
            json={"chains": [80002], "role": "admin"},
        )
    assert r.status_code == 201, r.text
    key: str = r.json()["apiKey"]
    return key


async def test_pro_waits_for_the_operator_and_a_project_key_alone_cannot_change_the_plan(
    page: Page, browser: Browser, service: Service
) -> None:
    email = await sign_up(page, service)
    project_id = await new_project(page, service, "Storefront", [80002])
    billing = f"{service.dashboard}/projects/{project_id}/billing"
    await page.goto(billing)
    await page.check("#plan-form input[value=PRO]")
    await page.click("#plan-form button[type=submit]")
    await page.wait_for_url(f"{billing}?done=requested")
    assert await page.locator("#current-plan .value").inner_text() == "FREE"
    assert await page.locator("#scheduled-plan").count() == 0
    row = page.locator("#approvals tbody tr").first
    assert "PRO" in await row.inner_text() and await row.get_attribute("data-status") == "pending"
    assert email in await row.inner_text()  # who asked
    await screenshots(page, "billing-pending")
    no_entry = await page.goto(f"{service.dashboard}/operator/approvals")
    assert no_entry is not None and no_entry.status == 404  # users are not the operator

    key = await admin_key(service, project_id)
    async with httpx.AsyncClient(base_url=service.url) as http:
        auth = {"Authorization": f"Bearer {key}"}
        for paid in ("ENTERPRISE", "PRO"):
            r = await http.put("/v1/project/plan", headers=auth, json={"plan": paid})
            assert r.status_code == 202, r.text
            assert (r.json()["status"], r.json()["plan"]) == ("pending", paid)
        project = (await http.get("/v1/project", headers=auth)).json()
        assert (project["plan"], project["nextPlan"]) == ("FREE", None)

        operator = await operator_page(browser, service)
        try:
            await operator.goto(f"{service.dashboard}/operator/approvals")
            await screenshots(operator, "approvals-pending")
            waiting = operator.locator("#pending tr", has_text="Storefront")
            assert "API key" in await waiting.inner_text()  # the key's request replaced the user's
            await decide(operator, service, project_id, "Approve", note="invoice 2026-118")
            assert "Approved." in await operator.locator("[role=status]").inner_text()
            done = operator.locator("#decided tr[data-status=approved]", has_text="Storefront")
            assert "invoice 2026-118" in await done.first.inner_text()
            await screenshots(operator, "approvals")
        finally:
            await operator.context.close()
        project = (await http.get("/v1/project", headers=auth)).json()
        assert (project["plan"], project["nextPlan"]) == ("FREE", "PRO")

    await page.goto(billing)
    assert await page.locator("#current-plan .value").inner_text() == "FREE"
    assert "PRO from" in await page.locator("#scheduled-plan").inner_text()
    assert "PRO from the next cycle" in await page.locator("#scheduled-change").inner_text()
    assert await page.locator("#approvals tr[data-status=approved]").count() == 1
    await screenshots(page, "billing-scheduled")


async def test_a_credit_pack_arrives_as_a_lot_once_approved_and_not_when_rejected(
    page: Page, browser: Browser, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Top-ups", [80002])
    billing = f"{service.dashboard}/projects/{project_id}/billing"
    operator = await operator_page(browser, service)
    try:
        await page.goto(billing)
        await page.check("#pack-form input[value='5M']")
        await page.click("#pack-form button[type=submit]")
        await page.wait_for_url(f"{billing}?done=requested")
        assert await page.locator("#lots tr[data-kind=purchase]").count() == 0
        await decide(operator, service, project_id, "Reject", note="no payment received")
        await page.goto(billing)
        rejected = page.locator("#approvals tr[data-status=rejected]")
        assert "no payment received" in await rejected.inner_text()
        assert await page.locator("#lots tr[data-kind=purchase]").count() == 0

        await page.check("#pack-form input[value='20M']")
        await page.click("#pack-form button[type=submit]")
        await page.wait_for_url(f"{billing}?done=requested")
        await decide(operator, service, project_id, "Approve")
        approved_on = datetime.now(UTC)
    finally:
        await operator.context.close()
    await page.goto(billing)
    lot = page.locator("#lots tr[data-kind=purchase]")
    assert await lot.count() == 1
    assert "20,000,000" in await lot.inner_text()
    expires = await lot.locator(".expires time").get_attribute("datetime")
    assert expires is not None
    assert datetime.fromisoformat(expires).date() == add_months(approved_on, 12).date()
    await screenshots(page, "billing-lots")


async def test_the_plans_page_lists_every_plan_with_its_overage_rate(
    page: Page, service: Service
) -> None:
    await sign_up(page, service)
    await page.goto(f"{service.dashboard}/plans")
    rows = page.locator("#plans tbody tr")
    plans = [await rows.nth(i).get_attribute("data-plan") for i in range(await rows.count())]
    assert plans == ["FREE", "STARTER", "PRO", "SCALE", "ENTERPRISE"]
    for i in range(len(plans)):
        overage = await rows.nth(i).locator(".overage").inner_text()
        assert overage == "€1.00 per million credits"
    pro = await page.locator("#plans tr[data-plan=PRO]").inner_text()
    assert "€20.00" in pro and "20,000,000" in pro and "Priority" in pro
    free = await page.locator("#plans tr[data-plan=FREE]").inner_text()
    assert "testnets only" in free
    assert "by contract" in await page.locator("#plans tr[data-plan=ENTERPRISE]").inner_text()
    await screenshots(page, "plans")


async def test_the_operator_sets_a_projects_enterprise_terms(
    page: Page, browser: Browser, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Bank", [80002])
    url = f"{service.dashboard}/operator/projects/{project_id}/enterprise"
    refused = await page.goto(url)
    assert refused is not None and refused.status == 404
    operator = await operator_page(browser, service)
    try:
        await operator.goto(url)
        await operator.fill("input[name=price_eur]", "twelve")
        await operator.click("#terms-form button[type=submit]")
        assert "euros" in await operator.locator("[role=alert]").inner_text()
        await operator.fill("input[name=price_eur]", "1,500.50")
        await operator.fill("input[name=credits]", "2,000,000,000")
        await operator.click("#terms-form button[type=submit]")
        await operator.wait_for_url(f"{url}?done=terms")
        await operator.goto(url)
        assert await operator.input_value("input[name=price_eur]") == "1500.50"
        assert await operator.input_value("input[name=credits]") == "2000000000"
        await screenshots(operator, "billing-enterprise-terms")
    finally:
        await operator.context.close()


async def test_an_owner_sets_and_lifts_the_spending_budget_in_the_browser(
    page: Page, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Budgeted", [80002])
    billing = f"{service.dashboard}/projects/{project_id}/billing"
    await page.goto(billing)
    assert "No spending budget" in await page.locator("#budget-state").inner_text()
    await page.fill("#budget-input", "2,500,000")
    await page.click("#budget-form button[type=submit]")
    await page.wait_for_url(f"{billing}?done=budget")
    state = await page.locator("#budget-state").inner_text()
    assert "2,500,000" in state and "(0%)" in state
    assert await page.locator("#budget-input").input_value() == "2500000"
    await screenshots(page, "billing-budget")
    key = await admin_key(service, project_id)
    async with httpx.AsyncClient(base_url=service.url) as http:
        auth = {"Authorization": f"Bearer {key}"}
        assert (await http.get("/v1/project", headers=auth)).json()["overageBudget"] == 2_500_000
        await page.fill("#budget-input", "")
        await page.click("#budget-form button[type=submit]")
        await page.wait_for_url(f"{billing}?done=budget")
        assert (await http.get("/v1/project", headers=auth)).json()["overageBudget"] is None
