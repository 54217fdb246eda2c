"""The request log in the browser: an op the EntryPoint refuses is found on the Requests page
by its sender, with its decoded reason, the same text the JSON-RPC answer carried; at a
desktop and a phone width, without horizontal overflow."""

from __future__ import annotations

import secrets

from playwright.async_api import Page

from tests.browser.conftest import DESKTOP, PHONE, Service, new_project, screenshots, sign_up
from tests.browser.test_operations import AMOY, api, issue_key, reload_until


async def no_horizontal_overflow(page: Page) -> bool:
    return bool(await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


async def test_a_refused_op_is_found_in_the_request_log_with_its_reason(
    page: Page, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Request log", [AMOY])
    key = await issue_key(service, project_id)
    sender = "0x" + secrets.token_hex(20)  # no code, and the op deploys none: AA20
    async with api(service, key) as http:
        defaults = (await http.get(f"/get-sdk-defaults?chainId={AMOY}")).json()
        fees = await http.post(
            f"/rpc/{AMOY}",
            json={"jsonrpc": "2.0", "id": 1, "method": "pimlico_getUserOperationGasPrice"},
        )
        fast = fees.json()["result"]["fast"]
        op = {
            "sender": sender,
            "nonce": "0x0",
            "callData": "0x",
            "callGasLimit": hex(100_000),
            "verificationGasLimit": hex(300_000),
            "preVerificationGas": hex(200_000),
            "maxFeePerGas": fast["maxFeePerGas"],
            "maxPriorityFeePerGas": fast["maxPriorityFeePerGas"],
            "signature": "0x" + "11" * 65,
        }
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "eth_sendUserOperation",
            "params": [op, defaults["entryPoint"]],
        }
        answer = (await http.post(f"/rpc/{AMOY}", json=call)).json()
    explanation = answer["error"]["data"]["explanation"]
    assert explanation.startswith("AA20: "), answer

    here = f"{service.dashboard}/projects/{project_id}/requests"
    await page.goto(f"{here}?sender={sender}")  # the log is written once a second
    await reload_until(page, "li.request", "the refused op is in the request log")
    await page.goto(here)
    await page.select_option("select[name=outcome]", "error")
    await page.fill("input[name=sender]", sender)
    await page.click("form.request-filters button[type=submit]")
    await page.wait_for_url("**outcome=error**")
    entry = page.locator("li.request")
    assert await entry.count() == 1
    assert await entry.locator("code.method").inner_text() == "rpc:eth_sendUserOperation"
    assert await entry.locator(".explanation").inner_text() == explanation
    assert "AA20" in await entry.locator(".message").inner_text()
    assert sender.lower() in await entry.locator(".op-fields").inner_text()
    assert key not in await page.content()

    for viewport in (DESKTOP, PHONE):
        await page.set_viewport_size(viewport)  # type: ignore[arg-type]
        assert await no_horizontal_overflow(page), f"overflow at {viewport['width']} px"
        assert await entry.locator(".explanation").is_visible()
    await screenshots(page, "requests")

    # The filters hold: the op's sender finds no successful call.
    await page.goto(f"{here}?outcome=ok&sender={sender}")
    assert await page.locator("li.request").count() == 0
