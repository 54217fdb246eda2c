"""One UserOperation's page in the browser: reached from the operations list, it shows the
op's steps with their times, its calls with target and selector, gas given against used, a
copy button on every hash and, on a devnet, the local node to look it up on rather than a
public explorer; at a desktop and a phone width, never wider than the screen."""

from __future__ import annotations

from eth_account import Account
from playwright.async_api import Page

from tests.browser.conftest import DESKTOP, PHONE, Service, screenshots
from tests.browser.layout import assert_fits
from tests.browser.test_operations import sdk, sponsoring_project


async def test_an_ops_page_shows_its_steps_calls_gas_and_copyable_hashes(
    page: Page, service: Service
) -> None:
    project_id, key = await sponsoring_project(page, service, "Op page")
    alice = Account.create().address
    async with await sdk(service, key) as client:
        wallet = await client.wallet(Account.create())
        op = await wallet.send([{"to": alice, "data": bytes.fromhex("a9059cbb")}])
        receipt = await op.wait(timeout=60)
    assert receipt.success

    await page.goto(f"{service.dashboard}/projects/{project_id}/operations")
    await page.click(f"tr[data-op='{op.user_op_hash}'] a.op-link")
    await page.wait_for_url(f"**/ops/{op.user_op_hash}")
    assert await page.locator(".op-status").inner_text() == "included"
    steps = await page.locator("ol.lifecycle li").evaluate_all(
        "items => items.map(i => i.dataset.step)"
    )
    assert steps[:5] == ["received", "validated", "queued", "submitted", "included"]
    assert await page.locator("li[data-step=included] time").count() == 1
    call = page.locator("tr[data-call='0']")
    assert await call.locator("code.hash").inner_text() == alice
    assert await call.locator(".selector").inner_text() == "0xa9059cbb"
    used = int((await page.locator(".gas-used").inner_text()).replace(",", ""))
    given = int((await page.locator(".gas-estimated").inner_text()).replace(",", ""))
    assert 0 < used <= given
    # Every hash has its copy button, naming the element it copies.
    for hash_id in ("op-hash", "op-tx", "op-sender", "op-entry-point", "op-paymaster"):
        assert await page.locator(f"button.copy[data-copy='{hash_id}']").count() == 1
    assert await page.locator("#op-tx").inner_text() == receipt.transaction_hash
    # A devnet's op is on no public explorer: the page names the local node instead.
    assert await page.locator("a[href*='polygonscan']").count() == 0
    assert "127.0.0.1" in await page.locator(".node-link").inner_text()

    for viewport in (DESKTOP, PHONE):
        await page.set_viewport_size(viewport)  # type: ignore[arg-type]
        await assert_fits(page)
    await screenshots(page, "op")

    # Another account's project does not have the op.
    await page.goto(f"{service.dashboard}/projects/{project_id}/ops/0x{'00' * 32}")
    assert await page.locator("h1").first.inner_text() != "UserOperation"
