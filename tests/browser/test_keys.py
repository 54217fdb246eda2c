"""API keys in the browser: made with a chain set, the secret shown once, used, rotated and
revoked, with the REST API as the judge of whether a key works."""

from __future__ import annotations

import httpx
from playwright.async_api import Page

from tests.browser.conftest import Service, new_project, screenshots, sign_up


async def _works(service: Service, secret: str) -> int:
    async with httpx.AsyncClient(base_url=service.url, timeout=10) as http:
        answer = await http.get(
            "/get-sdk-defaults",
            params={"chainId": 80002},
            headers={"Authorization": f"Bearer {secret}"},
        )
    return answer.status_code


async def _create_key(page: Page) -> str:
    await page.click("main button:has-text('Create key')")
    secret = (await page.locator("#new-key").inner_text()).strip()
    assert secret.startswith("ew_test_"), secret
    return secret


async def test_sign_up_create_project_enable_amoy_and_create_a_key_that_works_until_revoked(
    page: Page, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Wallet app", [80002])
    keys_url = f"{service.dashboard}/projects/{project_id}/keys"
    await page.goto(keys_url)
    assert "No keys yet" in await page.locator("main").inner_text()
    secret = await _create_key(page)
    assert "shown only this once" in await page.locator("main").inner_text()
    await screenshots(page, "keys-created")
    assert await _works(service, secret) == 200

    await page.goto(keys_url)  # shown once: never again
    listed = await page.locator("main").inner_text()
    assert secret not in await page.content()
    key_id = secret.split("_")[2]
    assert f"ew_test_{key_id}_…" in listed
    row = page.locator("tr", has_text=key_id)
    assert "never" not in await row.inner_text()  # the call above was its first use
    await screenshots(page, "keys")

    await row.locator("button:has-text('Revoke')").click()
    await page.wait_for_url(f"{keys_url}?done=revoked")
    assert "revoked" in await page.locator("tr", has_text=key_id).inner_text()
    assert await _works(service, secret) == 401


async def test_rotating_a_key_retires_the_old_secret_and_keeps_its_chains(
    page: Page, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Rotation", [80002, 84532])
    await page.goto(f"{service.dashboard}/projects/{project_id}/keys")
    await page.uncheck("input[name=chains][value='84532']")
    old = await _create_key(page)
    assert await _works(service, old) == 200
    await page.goto(f"{service.dashboard}/projects/{project_id}/keys")
    old_id = old.split("_")[2]
    await page.locator("tr", has_text=old_id).locator("button:has-text('Rotate')").click()
    new = (await page.locator("#new-key").inner_text()).strip()
    assert new != old
    assert await _works(service, old) == 401
    assert await _works(service, new) == 200
    new_row = page.locator("tr", has_text=new.split("_")[2])
    assert "80002" in await new_row.inner_text()
    assert "84532" not in await new_row.inner_text()


async def test_a_project_keeps_its_last_admin_key(page: Page, service: Service) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Admins", [80002])
    await page.goto(f"{service.dashboard}/projects/{project_id}/keys")
    await page.select_option("select[name=role]", "admin")
    admin = await _create_key(page)
    await page.goto(f"{service.dashboard}/projects/{project_id}/keys")
    await (
        page.locator("tr", has_text=admin.split("_")[2])
        .locator("button:has-text('Revoke')")
        .click()
    )
    assert "last active admin key" in await page.locator("[role=alert]").inner_text()
    assert await _works(service, admin) == 200
