"""A project's first page in the browser: each enabled chain's RPC URL with the key
placeholder, the EntryPoints and paymaster served, copyable SDK and viem snippets, the last
ops and the multi-chain checklist, at a desktop and a phone width, never wider than the
screen; the SDK snippet, pasted as it is (the key put in), sends an op; and the usage page
shows that key's use by its name."""

from __future__ import annotations

import asyncio
import os
import sys

from playwright.async_api import Page

from tests.browser.conftest import DESKTOP, PHONE, ROOT, Service, screenshots
from tests.browser.layout import assert_fits
from tests.browser.test_operations import AMOY, api, sponsoring_project


async def _run_python(source: str) -> str:
    """Run `source` as a script of its own, as a user would; its output."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT / 'sdk' / 'src'}"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        source,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_the_home_page_gets_a_project_going_and_its_snippet_sends_an_op(
    page: Page, service: Service
) -> None:
    project_id, key = await sponsoring_project(page, service, "Home")
    async with api(service, key) as http:
        defaults = (await http.get("/get-sdk-defaults", params={"chainId": AMOY})).json()
        # The snippet runs with a service key of its own, named, to find its usage by name.
        made = await http.post("/v1/keys", json={"chains": [AMOY], "name": "Snippet"})
        assert made.status_code == 201, made.text
    snippet_key, snippet_key_id = made.json()["apiKey"], made.json()["keyId"]

    await page.goto(f"{service.dashboard}/projects/{project_id}")
    start = page.locator(f".chain-start[data-chain='{AMOY}']")
    assert await start.locator(f"#rpc-{AMOY}").inner_text() == (
        f"{service.url}/rpc/{AMOY}?apikey=YOUR_API_KEY"
    )
    entry_points = await start.locator(".entry-point code").all_inner_texts()
    assert entry_points == [defaults["entryPoint"], defaults["entryPointV07"]]
    paymasters = await start.locator(".paymaster code").all_inner_texts()
    assert paymasters[0] == defaults["paymaster"]
    assert "createSmartAccountClient" in await page.locator("#viem-snippet").inner_text()
    assert await page.locator("button.copy[data-copy='sdk-snippet']").count() == 1
    assert await page.locator("ol.checklist li").count() >= 1
    assert await page.locator("ul.last-ops li").count() == 0

    # The SDK snippet, as copied, with the key put in: it sends an op.
    snippet = await page.locator("#sdk-snippet").inner_text()
    assert "YOUR_API_KEY" in snippet
    printed = (await _run_python(snippet.replace("YOUR_API_KEY", snippet_key))).split()
    op_hash = printed[0]
    assert printed[1:] == ["succeeded"] and len(op_hash) == 66

    await page.reload()
    last = page.locator(f"ul.last-ops li[data-op='{op_hash}'] a")
    assert await last.count() == 1
    for viewport in (DESKTOP, PHONE):
        await page.set_viewport_size(viewport)  # type: ignore[arg-type]
        await assert_fits(page)
    await screenshots(page, "home")
    await last.click()
    await page.wait_for_url(f"**/ops/{op_hash}")

    # The keys page names the key; the usage page shows what each key used, by its name.
    await page.goto(f"{service.dashboard}/projects/{project_id}/keys")
    assert "Snippet" in await page.locator(".key-name").all_inner_texts()
    await page.goto(f"{service.dashboard}/projects/{project_id}/usage")
    by_key = page.locator("section[aria-labelledby=by-key] tbody tr")
    labels = await by_key.locator("td:first-child").all_inner_texts()
    assert f"Snippet ({snippet_key_id})" in labels
    for viewport in (DESKTOP, PHONE):
        await page.set_viewport_size(viewport)  # type: ignore[arg-type]
        await assert_fits(page)
