"""Browser tests of the dashboard: a real `entryway up` (devnets, API, workers, dashboard)
driven by Playwright in headless Chromium (Debian's `chromium`, which `make setup`
installs). Each test opens its own browser context, so cookies never leak between tests.

Screenshots of the pages go to `screenshots/` at the repository's root (git-ignored), at a
desktop and a phone width, for a person to look at."""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright

from entryway.devnet.anvil import free_port
from tests import running

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "screenshots"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
PASSWORD = "correct horse battery staple"


@dataclass
class Service:
    url: str
    data_dir: Path
    operator_token: str
    demo: dict[str, Any] = field(default_factory=dict)

    @property
    def dashboard(self) -> str:
        return f"{self.url}/dashboard"

    def log_text(self) -> str:
        """Everything the service has logged so far."""
        return running_log(self.data_dir).read_text(errors="replace")


def running_log(data_dir: Path) -> Path:
    return data_dir / "service.log"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "Chromium is not installed: run `make setup` (Debian package chromium)"
        if os.environ.get("CI") == "true":
            raise AssertionError(message)
        pytest.skip(f"!!! {message}; the dashboard's browser tests are SKIPPED !!!")
    return found


# Package-scoped: the service and the browser stop once the dashboard's tests are done, rather
# than idling through the rest of the run on a machine the other tests share.
@pytest.fixture(scope="package")
async def service(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Service]:
    data_dir = tmp_path_factory.mktemp("dashboard")
    port = free_port()
    proc = await running.start(
        data_dir,
        port,
        env={
            "ENTRYWAY_RATE_LIMITS": "FREE=1000/second",
            # Every test signs in from 127.0.0.1: the per-address limits would soon refuse
            # them all (tests/e2e/test_sign_in_limits.py holds the service to the defaults).
            "ENTRYWAY_DASHBOARD__SIGN_IN_PER_ADDRESS": "100000/minute",
            "ENTRYWAY_DASHBOARD__OPERATOR_SIGN_IN_PER_ADDRESS": "100000/minute",
            "ENTRYWAY_HEAVY_RATE_LIMITS": "FREE=1000/second",
        },
        log=running_log(data_dir),
    )
    try:
        yield Service(
            f"http://127.0.0.1:{port}",
            data_dir,
            (data_dir / "admin-token").read_text().strip(),
            json.loads((data_dir / "demo.json").read_text()),
        )
    finally:
        await running.stop(proc)


@pytest.fixture(scope="package")
async def browser() -> AsyncIterator[Browser]:
    executable = chromium()
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def context(browser: Browser) -> AsyncIterator[BrowserContext]:
    opened = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def page(context: BrowserContext) -> Page:
    return await context.new_page()


def new_email(name: str = "user") -> str:
    return f"{name}-{secrets.token_hex(4)}@example.com"


async def sign_up(page: Page, service: Service, email: str | None = None) -> str:
    """A new account, signed in on `page`; its email."""
    email = email or new_email()
    await page.goto(f"{service.dashboard}/signup")
    await page.fill("input[name=email]", email)
    await page.fill("input[name=password]", PASSWORD)
    await page.fill("input[name=password_again]", PASSWORD)
    await page.click("main button[type=submit]")
    await page.wait_for_url(f"{service.dashboard}/projects")
    return email


async def new_project(page: Page, service: Service, name: str, chains: list[int]) -> str:
    """A project made through the form; its id."""
    await page.goto(f"{service.dashboard}/projects/new")
    await page.fill("input[name=name]", name)
    for chain_id in chains:
        await page.check(f"input[name=chains][value='{chain_id}']")
    await page.click("main button:has-text('Create project')")
    await page.wait_for_url(f"{service.dashboard}/projects/*")
    return page.url.rstrip("/").rsplit("/", 1)[-1]


async def screenshots(page: Page, name: str) -> None:
    """The page as it is now, at a desktop and at a phone width."""
    SCREENSHOTS.mkdir(exist_ok=True)
    await page.set_viewport_size(PHONE)  # type: ignore[arg-type]
    await page.screenshot(path=SCREENSHOTS / f"{name}-phone.png", full_page=True)
    await page.set_viewport_size(DESKTOP)  # type: ignore[arg-type]
    await page.screenshot(path=SCREENSHOTS / f"{name}-desktop.png", full_page=True)
