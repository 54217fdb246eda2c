"""A key's name and allowlists in the browser: shown on the keys page, kept by a rotation
(the new secret works from where the old one did, and only from there)."""

from __future__ import annotations

from playwright.async_api import Page

from tests.browser.conftest import Service, new_project, sign_up
from tests.browser.test_operations import AMOY, api, issue_key

APP = "https://app.example.com"


async def test_a_rotated_key_keeps_its_name_and_allowlists(page: Page, service: Service) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Named keys", [AMOY])
    admin = await issue_key(service, project_id)
    async with api(service, admin) as http:
        made = await http.post(
            "/v1/keys", json={"chains": [AMOY], "name": "Web app", "allowedOrigins": [APP]}
        )
        assert made.status_code == 201, made.text
    key_id = made.json()["keyId"]

    await page.goto(f"{service.dashboard}/projects/{project_id}/keys")
    row = page.locator("tr", has_text=key_id)
    assert await row.locator(".key-name").inner_text() == "Web app"
    assert await row.locator(".key-limits").inner_text() == f"only from {APP}"
    await row.locator("button:has-text('Rotate')").click()
    new = (await page.locator("#new-key").inner_text()).strip()
    new_row = page.locator("tr", has_text=new.split("_")[2])
    assert await new_row.locator(".key-name").inner_text() == "Web app"
    assert await new_row.locator(".key-limits").inner_text() == f"only from {APP}"

    async with api(service, new) as http:
        assert (await http.get("/v1/credits", headers={"Origin": APP})).status_code == 200
        r = await http.get("/v1/credits")
    assert (r.status_code, r.json()["code"]) == (403, "origin_not_allowed")
