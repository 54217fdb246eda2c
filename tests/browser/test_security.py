"""The dashboard as an attacker meets it: forms refused without their CSRF token, cookies an
attacker's page cannot read or send, sessions that end on the server, the sign-in throttle,
invitation links, redirects that stay on the site, the security headers, and no secret or
password hash in any page or log."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from playwright.async_api import Browser, BrowserContext, Page

from entryway.domain.accounts import ProjectRole
from entryway.service.security_headers import DASHBOARD_POLICY
from entryway.storage.accounts import AccountStore
from entryway.storage.engine import make_engine, sqlite_url
from tests.browser.conftest import (
    DESKTOP,
    PASSWORD,
    Service,
    new_email,
    new_project,
    screenshots,
    sign_up,
)
from tests.browser.crawling import CSRF, SESSION, Visitor, crawl, csrf_token

EXPIRED_FORM = "This form has expired"
FAILED = "That email and password do not match an account."
TOO_MANY = "Too many attempts"
ACCOUNT_BURST = 5  # sign-ins to one account from one address, by default


async def fresh_page(browser: Browser) -> tuple[BrowserContext, Page]:
    context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    return context, await context.new_page()


async def operator_signs_in(page: Page, service: Service) -> None:
    await page.goto(f"{service.dashboard}/operator/signin")
    await page.fill("input[name=token]", service.operator_token)
    await page.click("main button[type=submit]")
    await page.wait_for_url(f"{service.dashboard}/operator*")


async def sign_in(page: Page, service: Service, email: str, password: str = PASSWORD) -> None:
    await page.goto(f"{service.dashboard}/signin")
    await page.fill("input[name=email]", email)
    await page.fill("input[name=password]", password)
    await page.click("main button[type=submit]")


async def invitation_link(page: Page, service: Service, project_id: str, email: str) -> str:
    await page.goto(f"{service.dashboard}/projects/{project_id}")
    await page.fill("input[name=email]", email)
    await page.click("main button:has-text('Create invitation link')")
    return (await page.locator("#invitation-link").inner_text()).strip()


async def issue_key(service: Service, project_id: str) -> str:
    async with httpx.AsyncClient(timeout=30) as http:
        answer = await http.post(
            f"{service.url}/v1/admin/projects/{project_id}/keys",
            headers={"authorization": f"Bearer {service.operator_token}"},
            json={"chains": [80002], "role": "admin"},
        )
    assert answer.status_code == 201, answer.text
    secret: str = answer.json()["apiKey"]
    return secret


def cookie(cookies: list[Any], name: str) -> dict[str, Any]:
    [found] = [c for c in cookies if c["name"] == name]
    return dict(found)


# ------------------------------------------------------------------- cookies and sessions


async def test_the_cookies_are_httponly_secure_samesite_and_kept_to_the_dashboard(
    page: Page, context: BrowserContext, service: Service
) -> None:
    await page.goto(f"{service.dashboard}/signin")
    before = cookie(await context.cookies(), CSRF)
    assert (before["httpOnly"], before["secure"], before["sameSite"], before["path"]) == (
        True,
        True,
        "Strict",
        "/dashboard",
    )
    assert not [c for c in await context.cookies() if c["name"] == SESSION]
    await sign_up(page, service)
    cookies = await context.cookies()
    session = cookie(cookies, SESSION)
    assert (session["httpOnly"], session["secure"], session["sameSite"], session["path"]) == (
        True,
        True,
        "Lax",
        "/dashboard",
    )
    assert len(session["value"]) >= 40  # 32 random bytes
    assert not [c for c in cookies if c["name"] == CSRF]  # the session has its own token
    assert await page.evaluate("document.cookie") == ""  # no script reads them


async def test_sign_out_ends_the_session_on_the_server(
    page: Page, context: BrowserContext, service: Service
) -> None:
    await sign_up(page, service)
    stolen = await Visitor.of(context, service)
    assert (await stolen.get("/dashboard/projects")).status_code == 200
    await page.click("header button:has-text('Sign out')")
    await page.wait_for_url(f"{service.dashboard}/signin")
    assert not [c for c in await context.cookies() if c["name"] == SESSION]
    replayed = await stolen.get("/dashboard/projects")
    assert replayed.status_code == 303
    assert replayed.headers["location"].startswith("/dashboard/signin")


async def test_a_password_change_ends_the_other_sessions(
    page: Page, context: BrowserContext, browser: Browser, service: Service
) -> None:
    email = await sign_up(page, service)
    old = await Visitor.of(context, service)
    other_context, other = await fresh_page(browser)
    try:
        await sign_in(other, service, email)
        await other.wait_for_url(f"{service.dashboard}/projects")
        await page.goto(f"{service.dashboard}/account")
        new_password = "a much longer passphrase now"
        await page.fill("input[name=current_password]", PASSWORD)
        await page.fill("input[name=new_password]", new_password)
        await page.fill("input[name=new_password_again]", new_password)
        await page.click("main button[type=submit]")
        await page.wait_for_url(f"{service.dashboard}/account?done=password")
        assert "Your other sessions were signed out" in await page.locator("main").inner_text()
        await screenshots(page, "account-password-changed")

        await other.goto(f"{service.dashboard}/projects")
        assert other.url.startswith(f"{service.dashboard}/signin")
        assert (await old.get("/dashboard/projects")).status_code == 303
        mine = await Visitor.of(context, service)  # the session that changed it goes on
        assert (await mine.get("/dashboard/projects")).status_code == 200

        await sign_in(other, service, email)  # the old password no longer opens it
        assert FAILED in await other.locator("[role=alert]").inner_text()
        await sign_in(other, service, email, new_password)
        await other.wait_for_url(f"{service.dashboard}/projects")
    finally:
        await other_context.close()


async def test_signing_in_as_someone_else_ends_the_previous_session(
    page: Page, service: Service
) -> None:
    first = Visitor(service)
    token = csrf_token((await first.get("/dashboard/signup")).text)
    account = {"email": new_email("first"), "password": PASSWORD, "password_again": PASSWORD}
    made = await first.post("/dashboard/signup", {**account, "csrf_token": token})
    assert made.status_code == 303
    before = dict(first.cookies)
    second_email = await sign_up(page, service)
    token = csrf_token((await first.get("/dashboard/projects")).text)
    form = {"csrf_token": token, "email": second_email, "password": PASSWORD}
    assert (await first.post("/dashboard/signin", form)).status_code == 303
    assert first.cookies[SESSION] != before[SESSION]
    assert (await first.get("/dashboard/projects")).status_code == 200
    assert (await Visitor(service, before).get("/dashboard/projects")).status_code == 303


# ------------------------------------------------------------------- sign-in throttle


async def test_repeated_failures_are_throttled_and_unknown_emails_look_alike(
    page: Page, browser: Browser, service: Service
) -> None:
    """Five sign-ins to an account from one address, then 429 until one is earned back;
    an email nobody has is answered in the very same words at the very same count."""
    email = await sign_up(page, service)
    stranger_context, stranger = await fresh_page(browser)
    try:
        for who in (email, new_email("nobody")):
            for attempt in range(ACCOUNT_BURST):
                await sign_in(stranger, service, who, f"wrong password {attempt}")
                assert await stranger.locator("[role=alert]").inner_text() == FAILED, attempt
            await sign_in(stranger, service, who, PASSWORD)  # even the right one, for now
            assert TOO_MANY in await stranger.locator("[role=alert]").inner_text()
            assert stranger.url.startswith(f"{service.dashboard}/signin")
        await screenshots(stranger, "signin-throttled")
    finally:
        await stranger_context.close()


async def test_a_burst_of_guesses_gets_no_more_tries_than_the_burst(
    page: Page, service: Service
) -> None:
    email = await sign_up(page, service)
    guesser = Visitor(service)
    token = csrf_token((await guesser.get("/dashboard/signin")).text)

    async def guess(n: int) -> httpx.Response:
        form = {"csrf_token": token, "email": email, "password": f"guess number {n}"}
        return await guesser.post("/dashboard/signin", form)

    answers = await asyncio.gather(*(guess(n) for n in range(12)))
    assert sum(FAILED in a.text for a in answers) <= ACCOUNT_BURST
    refused = [a for a in answers if a.status_code == 429]
    assert len(refused) >= 12 - ACCOUNT_BURST
    assert all(TOO_MANY in a.text and int(a.headers["retry-after"]) >= 1 for a in refused)


# ------------------------------------------------------------------- CSRF


async def test_each_form_refuses_a_missing_or_another_sessions_token(
    page: Page, context: BrowserContext, browser: Browser, service: Service
) -> None:
    owner_email = await sign_up(page, service)
    project_id = await new_project(page, service, "Guarded", [80002])
    owner = await Visitor.of(context, service)
    owner_token = csrf_token((await owner.get("/dashboard/projects")).text)
    invited_email = new_email("invited")
    link = await invitation_link(page, service, project_id, invited_email)
    other_context, other_page = await fresh_page(browser)
    try:
        await sign_up(other_page, service, invited_email)
        other = await Visitor.of(other_context, service)
        other_token = csrf_token((await other.get("/dashboard/projects")).text)
        project = f"/dashboard/projects/{project_id}"
        posts = [
            (owner, other_token, "/dashboard/projects/new", {"name": "Forged", "chains": "80002"}),
            (owner, other_token, f"{project}/settings", {"name": "Renamed", "chains": "80002"}),
            (owner, other_token, f"{project}/members", {"email": "x@example.com"}),
            (owner, other_token, "/dashboard/account/password", {
                "current_password": PASSWORD, "new_password": "forged password!",
                "new_password_again": "forged password!"}),
            (owner, other_token, "/dashboard/signout", {}),
            (other, owner_token, link.removeprefix(service.url), {}),
        ]  # fmt: skip
        for visitor, foreign, path, form in posts:
            for token in (None, foreign, ""):
                data = form if token is None else {**form, "csrf_token": token}
                answer = await visitor.post(path, data)
                assert answer.status_code == 403, (path, token, answer.status_code)
                assert EXPIRED_FORM in answer.text

        # Nothing changed: the owner is still signed in, the project is as it was, no
        # invitation to x@, the password unchanged, the invited user not yet a member.
        overview = await owner.get(project)
        assert overview.status_code == 200
        assert "Guarded" in overview.text and "Renamed" not in overview.text
        assert "x@example.com" not in overview.text
        assert "Forged" not in (await owner.get("/dashboard/projects")).text
        assert (await other.get(project)).status_code == 404
        check = Visitor(service)
        token = csrf_token((await check.get("/dashboard/signin")).text)
        signed = await check.post(
            "/dashboard/signin", {"csrf_token": token, "email": owner_email, "password": PASSWORD}
        )
        assert signed.status_code == 303
    finally:
        await other_context.close()


async def test_sign_up_and_sign_in_refuse_a_missing_or_another_visitors_token(
    service: Service,
) -> None:
    visitor, someone = Visitor(service), Visitor(service)
    csrf_token((await visitor.get("/dashboard/signup")).text)
    foreign = csrf_token((await someone.get("/dashboard/signup")).text)
    email = new_email("forged")
    account = {"email": email, "password": PASSWORD, "password_again": PASSWORD}
    for path in ("/dashboard/signup", "/dashboard/signin", "/dashboard/operator/signin"):
        for extra in ({}, {"csrf_token": foreign}):
            form = {**account, "token": service.operator_token, **extra}
            answer = await visitor.post(path, form)
            assert answer.status_code == 403, (path, extra)
            assert SESSION not in visitor.cookies
    # The forged sign-up made no account: the address is still free.
    token = csrf_token((await visitor.get("/dashboard/signup")).text)
    made = await visitor.post("/dashboard/signup", {**account, "csrf_token": token})
    assert made.status_code == 303 and SESSION in visitor.cookies


async def test_every_post_form_anyone_can_reach_refuses_a_missing_or_foreign_token(
    page: Page, context: BrowserContext, browser: Browser, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Crawled", [80002, 84532])
    await issue_key(service, project_id)
    await invitation_link(page, service, project_id, new_email("pending"))
    owner = await Visitor.of(context, service)
    owner_token = csrf_token((await owner.get("/dashboard/projects")).text)
    seen = await crawl(page, service, [f"/dashboard/projects/{project_id}", "/dashboard/account"])

    operator_context, operator_page = await fresh_page(browser)
    try:
        await operator_signs_in(operator_page, service)
        operator = await Visitor.of(operator_context, service)
        operator_token = csrf_token((await operator.get("/dashboard/projects")).text)
        operators = await crawl(operator_page, service, ["/dashboard/operator"])
    finally:
        await operator_context.close()

    actions = set(seen.forms)
    project = f"/dashboard/projects/{project_id}"
    assert {"/dashboard/signout", f"{project}/settings", f"{project}/members"} <= actions
    assert "/dashboard/account/password" in actions
    crawls = ((seen, owner, operator_token), (operators, operator, owner_token))
    for crawled, visitor, foreign in crawls:
        for form in crawled.forms.values():
            for fields in (form.without_token(), form.with_token(foreign)):
                answer = await visitor.post(form.action, fields)
                assert answer.status_code == 403, (form.page, form.action, answer.status_code)
        assert not crawled.csp_violations, crawled.csp_violations
    assert (await owner.get(project)).status_code == 200  # signed out by none of them


async def test_every_project_page_and_form_is_not_found_for_a_non_member(
    page: Page, context: BrowserContext, browser: Browser, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Members only", [80002, 84532])
    await issue_key(service, project_id)
    await invitation_link(page, service, project_id, new_email("pending"))
    seen = await crawl(page, service, [f"/dashboard/projects/{project_id}"])
    urls = [u for u in seen.pages if project_id in u]
    actions = [f for f in seen.forms.values() if project_id in f.action]
    assert len(urls) >= 3 and len(actions) >= 2
    intruder_context, intruder_page = await fresh_page(browser)
    try:
        await sign_up(intruder_page, service)
        intruder = await Visitor.of(intruder_context, service)
        token = csrf_token((await intruder.get("/dashboard/projects")).text)
        for url in urls:
            answer = await intruder.get(url)
            assert answer.status_code == 404, url
            assert "Members only" not in answer.text, url
        for form in actions:  # with the intruder's own, valid token
            fields = [(k, "Hijacked" if k == "name" else v) for k, v in form.with_token(token)]
            answer = await intruder.post(form.action, fields)
            assert answer.status_code == 404, form.action
    finally:
        await intruder_context.close()
    owner = await Visitor.of(context, service)
    overview = await owner.get(f"/dashboard/projects/{project_id}")
    assert "Members only" in overview.text and "Hijacked" not in overview.text


# ------------------------------------------------------------------- secrets


async def test_no_page_or_log_shows_a_secret_or_a_password_hash(
    page: Page, context: BrowserContext, browser: Browser, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Secrets", [80002])
    key = await issue_key(service, project_id)
    link = await invitation_link(page, service, project_id, new_email("guest"))
    invitation = link.rsplit("/", 1)[-1]
    user_pages = await crawl(page, service, [f"/dashboard/projects/{project_id}"])
    user_session = (await Visitor.of(context, service)).cookies[SESSION]

    operator_context, operator_page = await fresh_page(browser)
    try:
        await operator_signs_in(operator_page, service)
        operator_pages = await crawl(
            operator_page, service, ["/dashboard/operator", f"/dashboard/projects/{project_id}"]
        )
        operator_session = (await Visitor.of(operator_context, service)).cookies[SESSION]
    finally:
        await operator_context.close()

    assert len(user_pages.pages) >= 4 and len(operator_pages.pages) >= 3
    secrets = {
        "the password": PASSWORD,
        "the operator token": service.operator_token,
        "a password hash": "$argon2",
        "the new key's secret": key.split("_", 3)[3],
        "the demo admin key's secret": service.demo["apiKey"].split("_", 3)[3],
        "the demo service key's secret": service.demo["serviceKey"].split("_", 3)[3],
        "the user's session": user_session,
        "the operator's session": operator_session,
        "the invitation's token": invitation,
    }
    for crawled in (user_pages, operator_pages):
        for url, html in crawled.pages.items():
            for what, secret in secrets.items():
                assert secret not in html, f"{what} shown on {url}"
    log = service.log_text()
    printed = {"the demo admin key's secret", "the demo service key's secret"}  # at start-up
    for what, secret in secrets.items():
        assert what in printed or secret not in log, f"{what} in the service's log"


# ------------------------------------------------------------------- invitations


async def test_an_invitation_link_lets_the_invited_person_join_once(
    page: Page, context: BrowserContext, browser: Browser, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Shared", [80002])
    invited = new_email("member")
    link = await invitation_link(page, service, project_id, invited)
    assert link.startswith(f"{service.dashboard}/invitations/")
    await screenshots(page, "project-invitation-link")
    member_context, member = await fresh_page(browser)
    third_context, third = await fresh_page(browser)
    try:
        await member.goto(link)  # not signed in yet: sign up first, then back to the link
        await member.click("main a:has-text('Sign up')")
        await member.fill("input[name=email]", invited)
        await member.fill("input[name=password]", PASSWORD)
        await member.fill("input[name=password_again]", PASSWORD)
        await member.click("main button[type=submit]")
        await member.wait_for_url(link)
        await screenshots(member, "invitation")
        await member.click("main button:has-text('Join the project')")
        await member.wait_for_url(f"{service.dashboard}/projects/{project_id}")
        assert "Shared" in await member.locator(".project-nav").inner_text()
        assert invited in await member.locator("main table").inner_text()
        await member.goto(f"{service.dashboard}/projects")
        assert await member.locator(f"a[href$='/projects/{project_id}']").count() == 1

        # A member invites nobody: no form, and the request refused.
        await member.goto(f"{service.dashboard}/projects/{project_id}")
        assert await member.locator("button:has-text('Create invitation link')").count() == 0
        as_member = await Visitor.of(member_context, service)
        token = csrf_token((await as_member.get(f"/dashboard/projects/{project_id}")).text)
        refused = await as_member.post(
            f"/dashboard/projects/{project_id}/members",
            {"csrf_token": token, "email": "friend@example.com", "role": "owner"},
        )
        assert refused.status_code == 400 and "Only the project&#39;s owners invite" in refused.text
        overview = await as_member.get(f"/dashboard/projects/{project_id}")
        assert "friend@example.com" not in overview.text

        # The link works once.
        await member.goto(link)
        await member.click("main button:has-text('Join the project')")
        assert "unknown, used or expired" in await member.locator("main").inner_text()

        # A third user: no link, no project; another person's link opens nothing either.
        await sign_up(third, service)
        answer = await third.goto(f"{service.dashboard}/projects/{project_id}")
        assert answer is not None and answer.status == 404
        assert "Shared" not in await third.content()
        other_link = await invitation_link(page, service, project_id, new_email("someone"))
        await third.goto(other_link)
        await third.click("main button:has-text('Join the project')")
        assert "for another email address" in await third.locator("main").inner_text()
        answer = await third.goto(f"{service.dashboard}/projects/{project_id}")
        assert answer is not None and answer.status == 404
    finally:
        await member_context.close()
        await third_context.close()


async def test_an_expired_invitation_link_is_refused(
    page: Page, browser: Browser, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Stale", [80002])
    invited = new_email("late")
    engine = make_engine(sqlite_url(service.data_dir))  # the service's own database
    try:
        eight_days_ago = datetime.now(UTC) - timedelta(days=8)
        token = await AccountStore(engine).invite(
            project_id, invited, ProjectRole.MEMBER, None, eight_days_ago
        )
    finally:
        await engine.dispose()
    late_context, late = await fresh_page(browser)
    try:
        await sign_up(late, service, invited)
        await late.goto(f"{service.dashboard}/invitations/{token}")
        await late.click("main button:has-text('Join the project')")
        assert "unknown, used or expired" in await late.locator("main").inner_text()
        answer = await late.goto(f"{service.dashboard}/projects/{project_id}")
        assert answer is not None and answer.status == 404
    finally:
        await late_context.close()


# ------------------------------------------------------------------- redirects and headers


async def test_next_never_leads_off_the_dashboard(page: Page, service: Service) -> None:
    email = await sign_up(page, service)
    for target in (
        "https://evil.example",
        "//evil.example",
        "/\\evil.example",
        "/dashboard\\..\\evil.example",
        "https://evil.example/dashboard/projects",
        "javascript:alert(1)",
    ):
        visitor = Visitor(service)
        token = csrf_token((await visitor.get("/dashboard/signin")).text)
        form = {"csrf_token": token, "email": email, "password": PASSWORD, "next": target}
        answer = await visitor.post("/dashboard/signin", form)
        assert answer.status_code == 303, target
        assert answer.headers["location"] == "/dashboard/projects", target
    await page.click("header button:has-text('Sign out')")
    await page.goto(f"{service.dashboard}/signin?next=//evil.example")
    await page.fill("input[name=email]", email)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("main button[type=submit]")
    await page.wait_for_url(f"{service.dashboard}/projects")
    # A dashboard path is kept: after sign-in the visitor is where they were going.
    await page.click("header button:has-text('Sign out')")
    await page.goto(f"{service.dashboard}/account")
    assert "next=/dashboard/account" in page.url
    await page.fill("input[name=email]", email)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("main button[type=submit]")
    await page.wait_for_url(f"{service.dashboard}/account")


async def test_dashboard_pages_carry_the_security_headers(
    page: Page, context: BrowserContext, service: Service
) -> None:
    await sign_up(page, service)
    project_id = await new_project(page, service, "Headers", [80002])
    signed_in, anonymous = await Visitor.of(context, service), Visitor(service)
    for visitor, path, status in (
        (anonymous, "/dashboard/signin", 200),
        (anonymous, "/dashboard/signup", 200),
        (anonymous, "/dashboard/projects", 303),
        (signed_in, "/dashboard/projects", 200),
        (signed_in, f"/dashboard/projects/{project_id}", 200),
        (signed_in, "/dashboard/account", 200),
        (signed_in, "/dashboard/projects/00000000-0000-0000-0000-000000000000", 404),
    ):
        answer = await visitor.get(path)
        assert answer.status_code == status, path
        assert answer.headers["content-security-policy"] == DASHBOARD_POLICY, path
        assert answer.headers["cache-control"] == "no-store", path
        assert answer.headers["x-frame-options"] == "DENY", path
        assert answer.headers["x-content-type-options"] == "nosniff", path
        assert answer.headers["referrer-policy"] == "no-referrer", path
    assert "'unsafe-inline'" not in DASHBOARD_POLICY
    assert "frame-ancestors 'none'" in DASHBOARD_POLICY
