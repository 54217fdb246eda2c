"""Sign-up, projects and who may see them, in the browser."""

from __future__ import annotations

import httpx
from playwright.async_api import Browser, Page

from tests.browser.conftest import (
    DESKTOP,
    PASSWORD,
    Service,
    new_email,
    new_project,
    screenshots,
    sign_up,
)


async def test_a_new_user_signs_up_and_creates_a_project_on_amoy(
    page: Page, service: Service
) -> None:
    await sign_up(page, service)
    await screenshots(page, "projects-empty")
    project_id = await new_project(page, service, "Checkout", [80002])
    assert await page.locator("h2", has_text="Multi-chain checklist").is_visible()
    assert await page.locator("input[name=chains][value='80002']").is_checked()
    assert not await page.locator("input[name=chains][value='84532']").is_checked()
    await screenshots(page, "project-overview")
    await page.goto(f"{service.dashboard}/projects")
    assert await page.locator(f"a[href$='/projects/{project_id}']").inner_text() == "Checkout"


async def test_another_user_cannot_open_the_project_even_with_its_url(
    page: Page, browser: Browser, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Private", [80002])
    other = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    try:
        intruder = await other.new_page()
        await sign_up(intruder, service)
        for path in ("", "/keys", "/billing", "/usage", "/operations"):
            answer = await intruder.goto(f"{service.dashboard}/projects/{project_id}{path}")
            assert answer is not None and answer.status == 404, path
            assert "Private" not in await intruder.content()
        unknown = await intruder.goto(f"{service.dashboard}/projects/{project_id[:-1]}0")
        assert unknown is not None and unknown.status == 404  # alike for one that does not exist
        assert project_id not in await intruder.locator("main").inner_text()
    finally:
        await other.close()


async def test_free_projects_are_refused_polygon_mainnet_with_the_reason(
    page: Page, service: Service
) -> None:
    await sign_up(page, service)
    await new_project(page, service, "Mainnet hopes", [80002])
    await page.check("input[name=chains][value='137']")
    await page.click("main button:has-text('Save settings')")
    alert = page.locator("[role=alert]")
    assert "The FREE plan runs on testnets only" in await alert.inner_text()
    assert "137" in await alert.inner_text()
    await page.reload()
    assert not await page.locator("input[name=chains][value='137']").is_checked()


async def test_the_owner_named_by_the_operator_api_claims_the_account_through_an_invitation(
    page: Page, browser: Browser, service: Service
) -> None:
    """A project made by `POST /v1/admin/projects` for an email has an owner without a
    password: signing up with that email is refused, unless through an invitation link the
    operator made for that very address."""
    email = new_email("owner")
    async with httpx.AsyncClient(base_url=service.url, timeout=10) as http:
        made = await http.post(
            "/v1/admin/projects",
            headers={"Authorization": f"Bearer {service.operator_token}"},
            json={"email": email, "name": "Made by the operator", "chains": [80002]},
        )
    assert made.status_code == 201, made.text
    project_id = made.json()["projectId"]

    owner = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    try:
        claimant = await owner.new_page()
        await claimant.goto(f"{service.dashboard}/signup")
        await _fill_sign_up(claimant, email)
        assert "already exists" in await claimant.locator("[role=alert]").inner_text()

        await page.goto(f"{service.dashboard}/operator/signin")
        await page.fill("input[name=token]", service.operator_token)
        await page.click("main button[type=submit]")
        await page.goto(f"{service.dashboard}/projects/{project_id}")
        await page.fill("input[name=email]", email)
        await page.click("main button:has-text('Create invitation link')")
        link = (await page.locator("#invitation-link").inner_text()).strip()

        await claimant.goto(link)
        await claimant.click("main a:has-text('Sign up')")
        await _fill_sign_up(claimant, email)
        await claimant.wait_for_url(link)
        await claimant.click("main button:has-text('Join the project')")
        await claimant.wait_for_url(f"{service.dashboard}/projects/{project_id}")
        assert await claimant.locator(".project-name").inner_text() == "Made by the operator"
        assert "owner" in await claimant.locator("tr", has_text=email).inner_text()
    finally:
        await owner.close()


async def _fill_sign_up(page: Page, email: str) -> None:
    await page.fill("input[name=email]", email)
    await page.fill("input[name=password]", PASSWORD)
    await page.fill("input[name=password_again]", PASSWORD)
    await page.click("main button[type=submit]")
