"""The operations pages in the browser: UserOperations with their status and credit cost,
notarizations with their proofs, webhook endpoints with their delivery log and replay, and
sponsorship policies with their spend against their caps."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from entryway_sdk import Entryway
from eth_account import Account
from playwright.async_api import Browser, Page

from tests.browser.conftest import DESKTOP, PHONE, Service, new_project, screenshots, sign_up
from tests.browser.layout import assert_fits

AMOY = 80002


async def issue_key(service: Service, project_id: str, role: str = "admin") -> str:
    """A key of the project on Amoy, issued by the operator."""
    async with httpx.AsyncClient(base_url=service.url) as http:
        r = await http.post(
            f"/v1/admin/projects/{project_id}/keys",
            headers={"Authorization": f"Bearer {service.operator_token}"},
            json={"chains": [AMOY], "role": role},
        )
    assert r.status_code == 201, r.text
    return str(r.json()["apiKey"])


def api(service: Service, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=service.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )


async def until(check: Callable[[], Awaitable[bool]], what: str, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.5)


async def reload_until(page: Page, selector: str, what: str, within: float = 60) -> None:
    """Reload the page until `selector` matches something on it."""

    async def shown() -> bool:
        await page.reload()
        return await page.locator(selector).count() > 0

    await until(shown, what, within)


async def sponsoring_project(page: Page, service: Service, name: str) -> tuple[str, str]:
    """A new account's project on Amoy with a policy sponsoring its ops: its id and a key."""
    await sign_up(page, service)
    project_id = await new_project(page, service, name, [AMOY])
    key = await issue_key(service, project_id)
    async with api(service, key) as http:
        created = await http.post(
            "/v1/policies",
            json={"name": "Launch", "rules": {"spendCap": {"credits": 10_000_000}}},
        )
        assert created.status_code == 201, created.text
    return project_id, key


async def sdk(service: Service, key: str) -> Entryway:
    """The SDK on Amoy, as its quickstart sets it up."""
    return await Entryway.init(
        api_key=key,
        rpc_url=service.demo["chains"][str(AMOY)]["rpcUrl"],
        chain_id=AMOY,
        base_url=service.url,
    )


async def test_the_sdk_quickstarts_sponsored_op_appears_with_its_credit_cost(
    page: Page, service: Service
) -> None:
    project_id, key = await sponsoring_project(page, service, "Quickstart")
    # The SDK quickstart: a new wallet's first op, two calls, sponsored by default.
    async with await sdk(service, key) as client:
        wallet = await client.wallet(Account.create())
        alice, bob = Account.create().address, Account.create().address
        op = await wallet.send([{"to": alice, "data": b"gm"}, {"to": bob, "value": 0}])
        receipt = await op.wait(timeout=60)
        assert receipt.success

        async def settled() -> bool:
            return bool((await client.op_status(op.user_op_hash)).raw["creditsFinal"])

        await until(settled, "the sponsorship settles")
        status = await client.op_status(op.user_op_hash)
    assert status.status == "included" and status.credits

    await page.goto(f"{service.dashboard}/projects/{project_id}/operations")
    row = page.locator(f"tr[data-op='{op.user_op_hash}']")
    assert await row.locator(".status").inner_text() == "included"
    assert await row.locator(".credits").inner_text() == f"{status.credits:,}"
    # A devnet op: no public explorer knows it, so the hash is shown, not linked.
    assert await row.locator(".tx a").count() == 0
    tx = row.locator(".tx code")
    assert (await tx.get_attribute("title") or "").startswith(receipt.transaction_hash)
    assert await page.locator("tr[data-task]").count() >= 1  # the settlement task
    attempts = await page.locator("tr[data-task] td.attempts").all_inner_texts()
    assert attempts and all(a.strip().isdigit() for a in attempts), attempts  # not "1 / 2000"
    await page.set_viewport_size(PHONE)  # type: ignore[arg-type]
    credits = row.locator(".credits")
    box = await credits.bounding_box()
    assert box is not None and box["x"] + box["width"] <= PHONE["width"]  # seen unscrolled
    await assert_fits(page)
    await page.set_viewport_size(DESKTOP)  # type: ignore[arg-type]
    for version in ("0.8", "0.7"):  # each EntryPoint release's paymaster has its deposit
        tile = page.locator(f".deposit[data-chain='{AMOY}'][data-version='{version}']")
        assert f"EntryPoint v{version}" in await tile.locator(".label").inner_text()
        assert (await tile.locator(".value").inner_text()).endswith(" POL")
    await screenshots(page, "operations")

    # The policy that paid shows its spend against its cap: the op's sponsorship.
    await page.goto(f"{service.dashboard}/projects/{project_id}/policies")
    cap = page.locator(".policy [data-cap=credits]")
    spent = int((await cap.locator(".used").inner_text()).replace(",", ""))
    assert 0 < spent <= status.credits  # its sponsorship (its relay may cost nothing)
    assert await cap.locator(".limit").inner_text() == "10,000,000"
    await screenshots(page, "policies")


async def test_a_webhook_endpoint_shows_its_delivery_log_and_replays(
    page: Page, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Hooks", [AMOY])
    webhooks = f"{service.dashboard}/projects/{project_id}/webhooks"
    await page.goto(webhooks)
    await page.fill(
        "input[name=url]", "https://receiver.example.com/entrywayhooks/productionuserops"
    )
    await page.check("input[name=event_types][value='userop.included']")
    await page.click("main button:has-text('Add endpoint')")
    secret = await page.locator("#webhook-secret").inner_text()
    assert secret.startswith("whsec_")
    await page.set_viewport_size(PHONE)  # type: ignore[arg-type]
    await assert_fits(page)  # the secret's notice, its URL and code included
    await page.set_viewport_size(DESKTOP)  # type: ignore[arg-type]
    endpoint = page.locator("section.endpoint")
    endpoint_id = await endpoint.get_attribute("data-endpoint")
    await page.goto(webhooks)
    assert secret not in await page.content()  # shown once
    assert await endpoint.count() == 1

    await page.click("main button:has-text('Send test event')")
    assert "Test event queued" in await page.locator("[role=status]").inner_text()
    await reload_until(page, "li.attempt", "the first attempt is logged")
    delivery = page.locator("tr[data-delivery]")
    assert await delivery.locator("code").first.inner_text() == "webhook.test"
    assert await delivery.locator("li.attempt").first.get_attribute("data-outcome") in {
        "failed",
        "refused",
        "in_flight",
    }
    await screenshots(page, "webhooks")

    # Still being retried: a replay is refused with the reason.
    await delivery.locator("button:has-text('Replay')").click()
    assert "still being attempted" in await page.locator("[role=alert]").inner_text()

    # Disabled, its pending retry is skipped; enabled again, the delivery can be replayed.
    await page.goto(webhooks)
    await page.click("main button:has-text('Disable')")
    assert "disabled" in await endpoint.locator(".badge").first.inner_text()
    await reload_until(page, "tr[data-delivery] .state :text('skipped')", "the retry is skipped")
    await page.click("main button:has-text('Enable')")
    await page.locator("tr[data-delivery] button:has-text('Replay')").click()
    assert "Replay queued" in await page.locator("[role=status]").inner_text()
    assert "replayed 1" in await page.locator("tr[data-delivery] .state").inner_text()

    key = await issue_key(service, project_id)
    async with api(service, key) as http:

        async def attempted_again() -> bool:
            log = await http.get(f"/v1/webhooks/endpoints/{endpoint_id}/deliveries")
            assert log.status_code == 200, log.text
            (only,) = log.json()["deliveries"]
            return bool(only["replays"] == 1 and len(only["attempts"]) >= 2)

        await until(attempted_again, "the replay makes a new attempt")
    await reload_until(page, "li.attempt:has-text('#2')", "the replay's attempt is shown")


async def test_a_policy_is_created_and_edited_with_the_apis_rules_and_errors(
    page: Page, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Policies", [AMOY])
    policies = f"{service.dashboard}/projects/{project_id}/policies"
    await page.goto(policies)
    await page.fill("input[name=name]", "Launch")
    await page.fill("input[name=spend_credits]", "lots")
    await page.click("main button:has-text('Create policy')")
    spend = page.locator("input[name=spend_credits]")
    assert await spend.get_attribute("aria-invalid") == "true"  # the field is marked
    problem = page.locator("#spend_credits-problem")  # beside it, named by it
    assert await spend.get_attribute("aria-describedby") == "spend_credits-problem"
    assert await problem.inner_text() == (
        "Enter a whole number from 0 to 4,611,686,018,427,387,904, or leave it empty."
    )
    assert await page.locator("label", has=spend).locator(".field-problem").count() == 1
    assert "spendCap" not in await page.locator("main").inner_text()
    assert "field marked below" in await page.locator("[role=alert]").inner_text()
    outline = await spend.evaluate("e => getComputedStyle(e).outlineStyle")
    assert outline == "solid"
    assert await page.input_value("input[name=name]") == "Launch"  # what was typed stays

    await page.fill("input[name=spend_credits]", "50000")
    await page.select_option("select[name=spend_period]", "month")
    await page.fill("input[name=operation_count]", "100")
    await page.select_option("select[name=operation_period]", "day")
    await page.fill("input[name=sender_operations]", "5")
    await page.fill("input[name=sponsor_name]", "Acme")
    await page.click("main button:has-text('Create policy')")
    assert "Policy created" in await page.locator("[role=status]").inner_text()
    card = page.locator("section.policy")
    assert await card.locator("[data-cap=credits] .limit").inner_text() == "50,000"
    assert await card.locator("[data-cap=credits] .used").inner_text() == "0"
    assert await card.locator("[data-cap=operations] .limit").inner_text() == "100"

    await card.locator("a:has-text('Edit')").click()
    await page.fill("textarea[name=allowed_selectors]", "0x1234")
    await page.click("main button:has-text('Save policy')")
    selectors_problem = await page.locator("#allowed_selectors-problem").inner_text()
    assert selectors_problem.startswith("Must be a list of 4-byte hex selectors")
    for moment in ("starts_at", "ends_at"):  # typed as ISO 8601 in UTC, never mm/dd/yyyy
        field = page.locator(f"input[name={moment}]")
        assert await field.get_attribute("type") == "text"
        assert await field.get_attribute("placeholder") == "YYYY-MM-DD HH:MM:SS"
    await page.fill("input[name=name]", "Launch week")
    await page.fill("input[name=spend_credits]", "70000")
    await page.fill("textarea[name=allowed_selectors]", "0xa9059cbb")
    await page.fill("input[name=ends_at]", "2031-01-01 00:00:00")
    await page.uncheck("input[name=active]")
    await page.click("main button:has-text('Save policy')")
    assert "Policy saved" in await page.locator("[role=status]").inner_text()
    await screenshots(page, "policies-edited")

    key = await issue_key(service, project_id)
    async with api(service, key) as http:
        listed = await http.get("/v1/policies")
    assert listed.status_code == 200, listed.text
    (policy,) = listed.json()["policies"]
    assert policy["name"] == "Launch week" and policy["active"] is False
    rules: dict[str, Any] = policy["rules"]
    assert rules == {
        "spendCap": {"credits": 70_000, "period": "month"},
        "operationCap": {"operations": 100, "period": "day"},
        "perSender": {"period": "day", "operations": 5},
        "allowedSelectors": ["0xa9059cbb"],
        "endsAt": "2031-01-01T00:00:00+00:00",
        "sponsor": {"name": "Acme"},
    }


async def test_an_anchored_notarization_downloads_its_proof(
    page: Page, browser: Browser, service: Service, tmp_path: Path
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Notary", [AMOY])
    key = await issue_key(service, project_id, role="service")
    digest = "0x" + secrets.token_hex(32)
    async with api(service, key) as http:
        accepted = await http.post(
            "/v1/notarizations",
            json={"chainId": AMOY, "documentHash": digest, "mode": "direct", "label": "Invoice"},
        )
        assert accepted.status_code == 202, accepted.text
        notarization_id = accepted.json()["id"]

        operations = f"{service.dashboard}/projects/{project_id}/operations"
        await page.goto(operations)
        row = f"tr[data-notarization='{notarization_id}']"
        assert await page.locator(row).count() == 1
        await reload_until(page, f"{row} a:has-text('Download proof')", "it is anchored")
        assert await page.locator(f"{row} .status").inner_text() == "anchored"
        async with page.expect_download() as downloading:
            await page.click(f"{row} a:has-text('Download proof')")
        download = await downloading.value
        saved = tmp_path / download.suggested_filename
        await download.save_as(saved)
        proof = await http.get(f"/v1/notarizations/{notarization_id}/proof")
    assert proof.status_code == 200, proof.text
    assert json.loads(saved.read_text()) == proof.json()
    assert download.suggested_filename == f"notarization-{notarization_id}-proof.json"
    await screenshots(page, "operations-notarized")

    other = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    try:
        intruder = await other.new_page()
        await sign_up(intruder, service)
        project = operations.removesuffix("/operations")
        for path in ("/webhooks", "/policies", f"/notarizations/{notarization_id}/proof"):
            answer = await intruder.request.get(f"{project}{path}")
            assert answer.status == 404, path
    finally:
        await other.close()
