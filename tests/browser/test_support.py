"""Support requests in the browser: a user asks for an additional network, the operator reads
the request with its fields and answers, the user reads the answer; nobody else sees it."""

from __future__ import annotations

from playwright.async_api import Browser, Page

from tests.browser.conftest import DESKTOP, Service, new_project, screenshots, sign_up


async def operator_signs_in(page: Page, service: Service) -> None:
    await page.goto(f"{service.dashboard}/operator/signin")
    await page.fill("input[name=token]", service.operator_token)
    await page.click("main button[type=submit]")
    await page.wait_for_url(f"{service.dashboard}/operator")


async def test_a_network_request_reaches_the_operator_and_the_answer_reaches_its_author(
    page: Page, browser: Browser, service: Service
) -> None:
    email = await sign_up(page, service)
    await new_project(page, service, "Payroll", [80002])
    await page.goto(f"{service.dashboard}/support")
    assert "Payroll: FREE: community support" in await page.locator("main").inner_text()
    await page.select_option("#support-project", label="Payroll (FREE: community support)")
    assert await page.locator("#support-level").inner_text() == (
        "Support for this project: FREE: community support."
    )
    await page.select_option("#support-topic", "billing")
    assert await page.locator("#network-fields").is_hidden()  # for technical support only
    await page.select_option("#support-topic", "technical")
    assert await page.locator("#network-fields").is_visible()
    asked = await page.locator("#provider-requirements").inner_text()
    assert "debug_traceCall" in asked and "ERC-7562" in asked and "eth_feeHistory" in asked

    rows = await page.locator("#rpc-endpoints tbody tr").all_inner_texts()
    assert len(rows) == 4
    for chain_id, url in (
        ("137", "https://polygon-rpc.com"),
        ("80002", "https://rpc-amoy.polygon.technology"),
        ("8453", "https://mainnet.base.org"),
        ("84532", "https://sepolia.base.org"),
    ):
        row = next(r for r in rows if url in r)
        assert f"\t{chain_id}\t" in row and "rate-limited" in row, row

    await page.fill("textarea[name=message]", "We would like to run on Gnosis.")
    await page.fill("input[name=chain_name]", "Gnosis")
    await page.fill("input[name=mainnet_chain_id]", "100")
    await page.fill("input[name=testnet_chain_id]", "ten thousand")  # not a number
    await page.fill("textarea[name=use_case]", "Payroll in a stable-fee currency")
    await page.evaluate("document.getElementById('support-form').noValidate = true")
    await page.click("main button:has-text('Send request')")
    assert "testnet chain id" in await page.locator("[role=alert]").inner_text()
    assert await page.locator("input[name=chain_name]").input_value() == "Gnosis"  # kept
    await screenshots(page, "support-error")

    await page.fill("input[name=testnet_chain_id]", "10200")
    await page.click("main button:has-text('Send request')")
    await page.wait_for_url(f"{service.dashboard}/support?done=filed")
    mine = page.locator(".support-item")
    assert await mine.count() == 1
    text = await mine.inner_text()
    for shown in ("open", "Gnosis", "100", "10200", "Payroll in a stable-fee currency", "Payroll"):
        assert shown in text, shown
    must_offer = await mine.locator(".provider-must-offer").inner_text()
    assert must_offer == "debug_traceCall, eth_feeHistory"
    await screenshots(page, "support")

    operator_context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    other_context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    try:
        operator = await operator_context.new_page()
        await operator_signs_in(operator, service)
        await operator.goto(f"{service.dashboard}/operator/support")
        request = operator.locator(".support-item", has_text=email)
        assert await request.count() == 1
        seen = await request.inner_text()
        for shown in ("Gnosis", "100", "10200", "Payroll in a stable-fee currency", "open"):
            assert shown in seen, shown
        assert "RPC provider must offer\ndebug_traceCall, eth_feeHistory" in seen
        await screenshots(operator, "operator-support")
        await operator.get_by_label(f"Answer to {email}").fill(
            "Gnosis is planned: we write by March."
        )
        await (
            operator.get_by_label(f"Answer to {email}")
            .locator("xpath=ancestor::form")
            .locator("button")
            .click()
        )
        await operator.wait_for_url(f"{service.dashboard}/operator/support?done=answered")
        assert await operator.get_by_label(f"Answer to {email}").count() == 0  # no longer open
        answered = await operator.locator(".support-item", has_text=email).inner_text()
        assert "answered" in answered and "we write by March" in answered

        other = await other_context.new_page()
        await sign_up(other, service)
        await other.goto(f"{service.dashboard}/support")
        assert "Gnosis" not in await other.locator("main").inner_text()
        assert await other.locator(".support-item").count() == 0
        options = await other.locator("#support-project option").all_inner_texts()
        assert not any("Payroll" in o for o in options)  # not another user's project
    finally:
        await operator_context.close()
        await other_context.close()

    await page.reload()
    item = await page.locator(".support-item").inner_text()
    assert "answered" in item and "Gnosis is planned: we write by March." in item
    await screenshots(page, "support-answered")


async def test_a_request_cannot_name_another_users_project(
    page: Page, browser: Browser, service: Service
) -> None:
    await sign_up(page, service)
    theirs = await new_project(page, service, "Not yours", [80002])
    other_context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    try:
        other = await other_context.new_page()
        await sign_up(other, service)
        await other.goto(f"{service.dashboard}/support")
        await other.evaluate(
            "(id) => { const o = new Option('forged', id); "
            "document.getElementById('support-project').add(o); o.selected = true; }",
            theirs,
        )
        await other.fill("textarea[name=message]", "Tell me about this project")
        await other.click("main button:has-text('Send request')")
        assert "Choose one of your projects" in await other.locator("[role=alert]").inner_text()
        assert await other.locator(".support-item").count() == 0
    finally:
        await other_context.close()
