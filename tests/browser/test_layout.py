"""Every dashboard page fits a desktop and a phone: nothing scrolls sideways but the tables
made to (see layout.py for what counts)."""

from __future__ import annotations

from playwright.async_api import Browser, BrowserContext, Page

from tests.browser.conftest import DESKTOP, PHONE, Service, new_email, new_project, sign_up
from tests.browser.crawling import crawl
from tests.browser.layout import overflows
from tests.browser.test_security import fresh_page, invitation_link, issue_key, operator_signs_in


async def misfits(page: Page, urls: list[str]) -> list[str]:
    found = []
    for url in urls:
        await page.goto(url)
        for size in (DESKTOP, PHONE):
            await page.set_viewport_size(size)  # type: ignore[arg-type]
            found += [f"{url} at {size['width']}px: {o}" for o in await overflows(page)]
        await page.set_viewport_size(DESKTOP)  # type: ignore[arg-type]
    return found


async def test_every_project_page_fits_a_desktop_and_a_phone(
    page: Page, context: BrowserContext, service: Service
) -> None:
    await sign_up(page, service, new_email("a-rather-long-address-for-a-phone-screen"))
    project_id = await new_project(page, service, "Layout", [80002, 84532])
    await issue_key(service, project_id)
    await invitation_link(page, service, project_id, new_email("someone-with-a-long-name"))
    seen = await crawl(page, service, [f"/dashboard/projects/{project_id}", "/dashboard/account"])
    urls = [u for u, status in seen.statuses.items() if status == 200]
    assert len(urls) >= 8, urls
    found = await misfits(page, urls)
    assert not found, "\n".join(found)


async def test_every_operator_page_fits_a_desktop_and_a_phone(
    browser: Browser, service: Service
) -> None:
    context, page = await fresh_page(browser)
    try:
        await operator_signs_in(page, service)
        seen = await crawl(page, service, ["/dashboard/operator"])
        urls = [u for u, status in seen.statuses.items() if status == 200]
        assert len(urls) >= 4, urls
        found = await misfits(page, urls)
    finally:
        await context.close()
    assert not found, "\n".join(found)
