"""Sign-up, projects and who may see them, in the browser."""

from __future__ import annotations

from playwright.async_api import Browser, Page

from tests.browser.conftest import DESKTOP, Service, new_project, screenshots, sign_up


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
