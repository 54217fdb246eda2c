"""The developer's window in the browser: a key created on the keys page with a name and an
allowlist of origins (a wrong entry refused beside its field, highlighted), edited later,
and a request from an origin off the list refused with 403 `origin_not_allowed`; an op the
bundler refused at send listed on the Operations page with its reason and opened on its own
page; a bundled op's page saying how many times its bundle was sent. At a desktop and a
phone width, never wider than the screen."""

from __future__ import annotations

import secrets
from typing import Any

from eth_account import Account
from playwright.async_api import Page

from tests.browser.conftest import DESKTOP, PHONE, Service, new_project, screenshots, sign_up
from tests.browser.layout import assert_fits
from tests.browser.test_operations import (
    AMOY,
    api,
    issue_key,
    reload_until,
    sdk,
    sponsoring_project,
)

APP = "https://app.example.com"


async def fits_both_widths(page: Page) -> None:
    for viewport in (DESKTOP, PHONE):
        await page.set_viewport_size(viewport)  # type: ignore[arg-type]
        await assert_fits(page)
    await page.set_viewport_size(DESKTOP)  # type: ignore[arg-type]


async def test_a_key_made_with_a_name_and_origins_refuses_other_origins(
    page: Page, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Key form", [AMOY])
    keys = f"{service.dashboard}/projects/{project_id}/keys"
    await page.goto(keys)
    await page.fill("input[name=name]", "Web app")
    await page.fill("textarea[name=allowed_origins]", "app.example.com/path")
    await page.click("button:has-text('Create key')")
    # Refused beside the field, which is highlighted; what was typed is kept.
    origins = page.locator("textarea[name=allowed_origins]")
    assert await origins.get_attribute("aria-invalid") == "true"
    assert "is not an origin" in await page.locator("#allowed_origins-problem").inner_text()
    assert await page.locator("input[name=name]").input_value() == "Web app"
    assert await page.locator("#new-key").count() == 0  # no key was issued
    await fits_both_widths(page)
    await screenshots(page, "key-form-error")

    await origins.fill(APP)
    await page.click("button:has-text('Create key')")
    secret = (await page.locator("#new-key").inner_text()).strip()
    row = page.locator("tr", has_text=secret.split("_")[2])
    assert await row.locator(".key-name").inner_text() == "Web app"
    assert await row.locator(".key-limits").inner_text() == f"only from {APP}"
    await fits_both_widths(page)

    async with api(service, secret) as http:
        assert (await http.get("/v1/credits", headers={"Origin": APP})).status_code == 200
        r = await http.get("/v1/credits", headers={"Origin": "https://elsewhere.example"})
        assert (r.status_code, r.json()["code"]) == (403, "origin_not_allowed")

    # Edited: renamed, a client address list with a mistake first, then the origins cleared.
    await page.goto(keys)
    await page.locator("tr", has_text=secret.split("_")[2]).locator("a.edit-key").click()
    assert await page.locator("textarea[name=allowed_origins]").input_value() == APP
    await page.fill("input[name=name]", "Web app (staging)")
    await page.fill("textarea[name=allowed_clients]", "10.0.0.300")
    await page.click("button:has-text('Save key')")
    clients = page.locator("textarea[name=allowed_clients]")
    assert await clients.get_attribute("aria-invalid") == "true"
    assert "not an IP address" in await page.locator("#allowed_clients-problem").inner_text()
    await fits_both_widths(page)
    await clients.fill("")
    await page.fill("textarea[name=allowed_origins]", "")
    await page.click("button:has-text('Save key')")
    await page.wait_for_url("**/keys?done=saved")
    row = page.locator("tr", has_text=secret.split("_")[2])
    assert await row.locator(".key-name").inner_text() == "Web app (staging)"
    assert await row.locator(".key-limits").count() == 0
    async with api(service, secret) as http:
        r = await http.get("/v1/credits", headers={"Origin": "https://elsewhere.example"})
        assert r.status_code == 200, r.text


async def refused_send(service: Service, key: str) -> dict[str, Any]:
    """An op whose sender has no code and deploys none, sent: the bundler's error (AA20)."""
    async with api(service, key) as http:
        defaults = (await http.get(f"/get-sdk-defaults?chainId={AMOY}")).json()
        op = {
            "sender": "0x" + secrets.token_hex(20),
            "nonce": "0x0",
            "callData": "0x",
            "callGasLimit": hex(100_000),
            "verificationGasLimit": hex(300_000),
            "preVerificationGas": hex(200_000),
            "maxFeePerGas": hex(50 * 10**9),
            "maxPriorityFeePerGas": hex(30 * 10**9),
            "signature": "0x" + "11" * 65,
        }
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "eth_sendUserOperation",
            "params": [op, defaults["entryPoint"]],
        }
        answer = (await http.post(f"/rpc/{AMOY}", json=call)).json()
    assert "error" in answer, answer
    return dict(answer["error"])


async def test_an_op_refused_at_send_is_listed_with_its_reason_and_has_its_page(
    page: Page, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Refusals", [AMOY])
    key = await issue_key(service, project_id)
    error = await refused_send(service, key)

    await page.goto(f"{service.dashboard}/projects/{project_id}/operations")
    # The request log is written once a second.
    await reload_until(page, "table.refused tr[data-refused]", "the refusal is listed")
    row = page.locator("table.refused tr[data-refused]").first
    assert error["message"] in await row.locator(".reason").inner_text()
    assert await row.locator(".explanation").inner_text() == error["data"]["explanation"]
    await fits_both_widths(page)

    await row.locator("a.op-link").click()
    await page.wait_for_url("**/ops/0x*")
    assert await page.locator(".op-status").inner_text() == "refused"
    assert await page.locator(".op-reason").inner_text() == error["message"]
    assert await page.locator(".op-explanation").inner_text() == error["data"]["explanation"]
    steps = await page.locator("ol.lifecycle li").evaluate_all(
        "items => items.map(i => i.dataset.step)"
    )
    assert steps == ["received", "refused"]
    await fits_both_widths(page)
    await screenshots(page, "op-refused")


async def test_a_bundled_ops_page_says_how_many_times_it_was_sent(
    page: Page, service: Service
) -> None:
    project_id, key = await sponsoring_project(page, service, "Sends")
    async with await sdk(service, key) as client:
        wallet = await client.wallet(Account.create())
        op = await wallet.send([{"to": Account.create().address, "data": b""}])
        receipt = await op.wait(timeout=60)
    assert receipt.success

    await page.goto(f"{service.dashboard}/projects/{project_id}/ops/{op.user_op_hash}")
    submitted = page.locator("li[data-step=submitted]")
    assert await submitted.locator(".attempts").inner_text() == "sent 1 time"
    assert await submitted.locator("ul.fee-bumps").count() == 0  # mined at its first fees
    assert await page.locator("#op-tx").inner_text() == receipt.transaction_hash
    await fits_both_widths(page)
