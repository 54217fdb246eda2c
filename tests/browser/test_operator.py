"""The operator's console in the browser: every project with its owner and usage, plans and
prices, each chain's status, maintenance switched on and off for every caller, and the
operator role granted to a user from the command line."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import httpx
from playwright.async_api import Browser, Page

from tests.browser.conftest import DESKTOP, Service, new_project, screenshots, sign_up
from tests.browser.test_support import operator_signs_in

BASE_SEPOLIA = 84532
AMOY = 80002
OPERATOR_PAGES = ("/operator", "/operator/support", "/operator/plans", "/operator/network")
ENTRYWAY = str(Path(sys.executable).with_name("entryway"))


async def entryway_operator(service: Service, *args: str) -> tuple[int, str]:
    """`entryway operator ...` on the service's data directory: exit status and output."""
    proc = await asyncio.create_subprocess_exec(
        ENTRYWAY, "operator", *args, "--data-dir", str(service.data_dir),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


def demo_api(service: Service) -> httpx.AsyncClient:
    key = service.demo["apiKey"]
    return httpx.AsyncClient(
        base_url=service.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )


async def sdk_defaults(service: Service, chain_id: int) -> httpx.Response:
    async with demo_api(service) as api:
        return await api.get("/get-sdk-defaults", params={"chainId": chain_id})


async def json_rpc(service: Service, chain_id: int) -> httpx.Response:
    async with demo_api(service) as api:
        call = {"jsonrpc": "2.0", "id": 1, "method": "eth_supportedEntryPoints", "params": []}
        return await api.post(f"/rpc/{chain_id}", json=call)


async def test_the_operator_sees_every_project_with_its_owner_and_opens_it(
    page: Page, browser: Browser, service: Service
) -> None:
    email = await sign_up(page, service)
    project_id = await new_project(page, service, "Console seen", [AMOY, BASE_SEPOLIA])
    operator_context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    try:
        operator = await operator_context.new_page()
        await operator_signs_in(operator, service)
        row = operator.locator(f"#operator-projects tr[data-project='{project_id}']")
        text = await row.inner_text()
        assert "Console seen" in text and email in text and "FREE" in text
        assert f"{AMOY}, {BASE_SEPOLIA}" in text
        assert "1,000,000" in text  # the FREE grant, untouched
        demo = operator.locator(
            f"#operator-projects tr[data-project='{service.demo['projectId']}']"
        )
        assert await demo.count() == 1  # the operator's own demo project too
        await screenshots(operator, "operator-projects")
        await row.locator("a", has_text="Console seen").click()
        await operator.wait_for_url(f"{service.dashboard}/projects/{project_id}")
        assert await operator.locator(".project-name").inner_text() == "Console seen"

        await operator.goto(f"{service.dashboard}/operator/plans")
        plans = await operator.locator("#operator-plans").inner_text()
        assert re.search(r"PRO\s+20\.00\s+20,000,000", plans), plans
        assert "testnets only" in plans and "priority" in plans
        fees = await operator.locator("#operator-fees").inner_text()
        assert re.search(r"sponsorship\s+100", fees), fees
        await screenshots(operator, "operator-plans")
    finally:
        await operator_context.close()


async def test_people_who_are_not_the_operator_get_404_on_every_operator_page(
    page: Page, service: Service
) -> None:
    await sign_up(page, service)
    for path in OPERATOR_PAGES:
        answer = await page.goto(f"{service.dashboard}{path}")
        assert answer is not None and answer.status == 404, path
    await page.goto(f"{service.dashboard}/support")
    token = await page.locator("input[name=csrf_token]").first.input_value()
    posted = await page.request.post(
        f"{service.dashboard}/operator/network/{BASE_SEPOLIA}/maintenance",
        form={"csrf_token": token, "state": "on", "reason": "not mine to switch"},
        max_redirects=0,
    )
    assert posted.status == 404
    assert (await sdk_defaults(service, BASE_SEPOLIA)).status_code == 200  # nothing switched


async def test_maintenance_refuses_calls_on_its_chain_until_switched_off(
    page: Page, service: Service
) -> None:
    await operator_signs_in(page, service)
    await page.goto(f"{service.dashboard}/operator/network")
    for chain_id in (AMOY, BASE_SEPOLIA):
        card = page.locator(f"#chain-{chain_id}")
        assert await card.locator("[data-check=rpc]").inner_text() == "reachable"
        assert (
            f"{chain_id} as configured" in await card.locator("[data-check=chain-id]").inner_text()
        )
        balances = await card.locator("[data-executor]").all_inner_texts()
        token = "POL" if chain_id == AMOY else "ETH"  # in the token, as the project pages
        assert balances and all(re.search(rf"[1-9][0-9,.]* {token}", b) for b in balances)
        deposit_text = await card.locator("[data-check=deposit]").inner_text()
        assert re.search(rf"[0-9,.]+ {token}", deposit_text) and "wei" not in deposit_text
        for code in await card.locator("code").all():  # addresses shortened, never broken
            assert (await code.evaluate("c => c.getClientRects().length")) == 1
        assert "off" in await card.locator("[data-check=maintenance]").inner_text()
        validation = await card.locator("[data-check=validation-mode]").inner_text()
        assert validation.startswith("opcodes every ERC-7562 rule enforced"), validation
        deposits = await card.locator("[data-check=deposit] li").all()
        versions = ["0.8", "0.7", "0.9", "0.6"]
        assert [await d.get_attribute("data-version") for d in deposits] == versions
    await screenshots(page, "operator-network")

    base = page.locator(f"#chain-{BASE_SEPOLIA}")
    try:
        await base.locator("input[name=reason]").fill("node upgrade until 14:00 UTC")
        await base.locator("button:has-text('Start maintenance')").click()
        await page.wait_for_url(f"{service.dashboard}/operator/network?done=on")
        shown = await base.locator("[data-check=maintenance]").inner_text()
        assert "node upgrade until 14:00 UTC" in shown
        await screenshots(page, "operator-network-maintenance")

        refused = await sdk_defaults(service, BASE_SEPOLIA)
        assert refused.status_code == 503, refused.text
        problem = refused.json()
        assert problem["code"] == "network_connection_problem"
        assert "node upgrade until 14:00 UTC" in problem["detail"]
        checks = {c["check"]: c["passed"] for c in problem["checks"]}
        assert checks["not_under_maintenance"] is False
        rpc = await json_rpc(service, BASE_SEPOLIA)
        assert rpc.status_code == 503 and "node upgrade" in rpc.json()["detail"]
        assert (await sdk_defaults(service, AMOY)).status_code == 200  # the other chain runs
        assert (await json_rpc(service, AMOY)).status_code == 200
    finally:
        await page.goto(f"{service.dashboard}/operator/network")
        await base.locator("button:has-text('End maintenance')").click()
    await page.wait_for_url(f"{service.dashboard}/operator/network?done=off")
    assert "off" in await base.locator("[data-check=maintenance]").inner_text()
    answer = await sdk_defaults(service, BASE_SEPOLIA)
    assert answer.status_code == 200 and answer.json()["chainId"] == BASE_SEPOLIA
    assert (await json_rpc(service, BASE_SEPOLIA)).json()["result"]


async def test_maintenance_needs_a_reason(page: Page, service: Service) -> None:
    await operator_signs_in(page, service)
    await page.goto(f"{service.dashboard}/operator/network")
    form = page.locator(f"#chain-{AMOY} form")
    await form.evaluate("f => { f.noValidate = true; }")
    await form.locator("button").click()
    assert "Give a reason" in await page.locator("[role=alert]").inner_text()
    assert (await sdk_defaults(service, AMOY)).status_code == 200


async def test_entryway_operator_grant_gives_a_user_the_operator_pages(
    page: Page, service: Service
) -> None:
    email = await sign_up(page, service)
    answer = await page.goto(f"{service.dashboard}/operator")
    assert answer is not None and answer.status == 404

    status, out = await entryway_operator(service, "grant", email.upper())
    assert status == 0, out
    answer = await page.goto(f"{service.dashboard}/operator")  # the same session, at once
    assert answer is not None and answer.status == 200
    assert await page.locator("nav.top-nav a", has_text="Operator").count() == 1
    assert await page.locator("#operator-projects").count() == 1

    status, out = await entryway_operator(service, "revoke", email)
    assert status == 0, out
    answer = await page.goto(f"{service.dashboard}/operator")
    assert answer is not None and answer.status == 404

    status, out = await entryway_operator(service, "grant", "nobody-here@example.com")
    assert status == 1 and "no user has the email nobody-here@example.com" in out
