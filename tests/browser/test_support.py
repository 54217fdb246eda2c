"""Support requests in the browser: a user asks for an additional network, the operator reads
the request with its fields and answers, the user reads the answer; nobody else sees it. Each
request shows its support level's response target, and once answered who answered and when."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from playwright.async_api import Browser, Page

from entryway.domain.plans import SupportLevel
from entryway.domain.support import SupportTopic
from entryway.storage.engine import make_engine, sqlite_url
from entryway.storage.store import Store
from entryway.storage.support import SupportRequests
from tests.browser.conftest import (
    DESKTOP,
    Service,
    new_email,
    new_project,
    screenshots,
    sign_up,
)

ENTRYWAY = str(Path(sys.executable).with_name("entryway"))


async def grant_operator(service: Service, email: str) -> None:
    """`entryway operator grant EMAIL` on the service's data directory."""
    proc = await asyncio.create_subprocess_exec(
        ENTRYWAY, "operator", "grant", email, "--data-dir", str(service.data_dir),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await proc.communicate()
    assert proc.returncode == 0, out.decode()


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
    assert "Payroll: FREE: community support (a first answer within 72 hours)" in (
        await page.locator("main").inner_text()
    )
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
    before = datetime.now(UTC).replace(second=0, microsecond=0)
    await page.click("main button:has-text('Send request')")
    await page.wait_for_url(f"{service.dashboard}/support/*?done=filed")
    filed = await page.locator("#support-filed").inner_text()
    assert "Community support: a first answer within 72 hours, by " in filed
    due = datetime.strptime(filed.split(", by ")[1][:16], "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
    assert before + timedelta(hours=72) <= due <= datetime.now(UTC) + timedelta(hours=72)
    request_page = page.url.split("?")[0]
    target = await page.locator(".support-target").inner_text()
    assert (
        target
        == f"Community support: a first answer within 72 hours, due by {due:%Y-%m-%d %H:%M} UTC"
    )

    await page.goto(f"{service.dashboard}/support")
    mine = page.locator(".support-item")
    assert await mine.count() == 1
    text = await mine.inner_text()
    for shown in ("open", "Gnosis", "100", "10200", "Payroll in a stable-fee currency", "Payroll",
                  "within 72 hours"):  # fmt: skip
        assert shown in text, shown
    must_offer = await mine.locator(".provider-must-offer").inner_text()
    assert must_offer == "eth_call with state overrides, debug_traceCall, eth_feeHistory"
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
        offers = "eth_call with state overrides, debug_traceCall, eth_feeHistory"
        assert f"RPC provider must offer\n{offers}" in seen
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
        answer = await other.goto(request_page)
        assert answer is not None and answer.status == 404  # another user's request
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
    assert "Answered by the operator (token sign-in), " in item
    await screenshots(page, "support-answered")


async def test_the_author_sees_who_answered_and_when(
    page: Page, browser: Browser, service: Service
) -> None:
    await sign_up(page, service)
    await new_project(page, service, "Ledger", [80002])
    await page.goto(f"{service.dashboard}/support")
    await page.select_option("#support-project", label="Ledger (FREE: community support)")
    await page.select_option("#support-topic", "billing")
    await page.fill("textarea[name=message]", "When is my invoice issued?")
    await page.click("main button:has-text('Send request')")
    await page.wait_for_url(f"{service.dashboard}/support/*?done=filed")
    request_page = page.url.split("?")[0]
    assert await page.locator(".support-answered").count() == 0
    assert "No answer yet." in await page.locator("main").inner_text()

    operator_context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    try:
        operator = await operator_context.new_page()
        ops = await sign_up(operator, service, new_email("ops"))
        await grant_operator(service, ops)
        await operator.goto(f"{service.dashboard}/operator/support")
        item = operator.locator(".support-item", has_text="When is my invoice issued?")
        assert "Community support: a first answer within 72 hours" in await item.inner_text()
        box = operator.locator(".support-reply", has=operator.locator("textarea")).filter(
            has=operator.locator(f"form[action$='{request_page.rsplit('/', 1)[1]}/answer']")
        )
        await box.locator("textarea").fill("On the first of the month.")
        answered_from = datetime.now(UTC).replace(second=0, microsecond=0)
        await box.locator("button").click()
        await operator.wait_for_url(f"{service.dashboard}/operator/support?done=answered")
        answered_until = datetime.now(UTC)
    finally:
        await operator_context.close()

    await page.goto(request_page)
    shown = await page.locator(".support-answered").inner_text()
    assert shown.startswith(f"Answered by {ops}, ") and shown.endswith(" UTC")
    at = datetime.strptime(shown.split(", ")[-1][:16], "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
    assert answered_from <= at <= answered_until
    assert "On the first of the month." in await page.locator(".support-answer").inner_text()
    await page.goto(f"{service.dashboard}/support")
    assert f"Answered by {ops}" in await page.locator("main").inner_text()
    await screenshots(page, "support-answered-by")


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


async def test_the_operators_queue_runs_by_level_and_marks_overdue_requests(
    page: Page, service: Service
) -> None:
    """Requests filed hours ago (written straight into the service's database) against the
    default targets: SLA 4 h, priority 24 h, community 72 h."""
    email = await sign_up(page, service)
    tag = new_email("queue")  # sets this test's requests apart from the others'
    engine = make_engine(sqlite_url(service.data_dir))
    try:
        user_id = await Store(engine).user_by_email(email)
        assert user_id is not None
        requests = SupportRequests(engine)
        now = datetime.now(UTC)
        filed = {}
        for level, hours in [
            (SupportLevel.COMMUNITY, 10),  # within its 72 h
            (SupportLevel.PRIORITY, 30),  # past its 24 h
            (SupportLevel.SLA, 5),  # past its 4 h
            (SupportLevel.SLA, 1),  # within its 4 h
        ]:
            message = f"{tag} {level.value} {hours}h"
            at = now - timedelta(hours=hours)
            filed[message] = await requests.file(
                user_id, None, SupportTopic.OTHER, message, None, at, level
            )
    finally:
        await engine.dispose()

    await operator_signs_in(page, service)
    await page.goto(f"{service.dashboard}/operator/support")
    ours = page.locator(".support-item", has_text=tag)
    order = [text.split("\n") for text in await ours.all_inner_texts()]
    assert [next(line for line in item if tag in line) for item in order] == [
        f"{tag} sla_and_dedicated_account_manager 5h",
        f"{tag} sla_and_dedicated_account_manager 1h",
        f"{tag} priority 30h",
        f"{tag} community 10h",
    ]
    late = await page.locator(".support-item.overdue", has_text=tag).all_inner_texts()
    assert len(late) == 2 and all("\noverdue\n" in text for text in late)  # the badge
    assert f"{tag} sla_and_dedicated_account_manager 5h" in late[0]
    assert f"{tag} priority 30h" in late[1]
    assert "2 overdue" in await page.locator("#overdue-count").inner_text()
    await screenshots(page, "operator-support-queue")

    await page.reload()  # seen again: still marked, not logged again
    async with httpx.AsyncClient(base_url=service.url, timeout=30) as http:
        scraped = (await http.get("/metrics")).text
    assert 'entryway_support_overdue{level="sla_and_dedicated_account_manager"}' in scraped
    log = service.log_text()
    for message in (f"{tag} sla_and_dedicated_account_manager 5h", f"{tag} priority 30h"):
        assert log.count(f"support request overdue: {filed[message]}") == 1, message
    for message in (f"{tag} sla_and_dedicated_account_manager 1h", f"{tag} community 10h"):
        assert f"support request overdue: {filed[message]}" not in log
