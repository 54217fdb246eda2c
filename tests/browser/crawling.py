"""What the security tests need beyond the browser: every dashboard page a viewer can reach
by following links (with the forms on it), and requests sent by hand with a viewer's cookies.

The dashboard's cookies are Secure. Browsers send them to http://127.0.0.1 (a secure context
for them); httpx does not, so `Visitor` carries its cookies itself."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import httpx
from playwright.async_api import BrowserContext, Page
from playwright.async_api import Error as PlaywrightError

from tests.browser.conftest import Service

SESSION = "entryway_session"
CSRF = "entryway_csrf"
_CSRF_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')
MAX_PAGES = 80


def csrf_token(html: str) -> str:
    found = _CSRF_FIELD.search(html)
    assert found, "no form with a CSRF token on the page"
    return found.group(1)


@dataclass
class Visitor:
    """Requests to the service with cookies of its own (taken from a browser or set by the
    answers), never following redirects."""

    service: Service
    cookies: dict[str, str] = field(default_factory=dict)

    @classmethod
    async def of(cls, context: BrowserContext, service: Service) -> Visitor:
        cookies = {c["name"]: c["value"] for c in await context.cookies()}
        return cls(service, cookies)

    async def get(self, path: str) -> httpx.Response:
        return await self._send("GET", path)

    async def post(self, path: str, data: list[tuple[str, str]] | dict[str, str]) -> httpx.Response:
        """`data` sent as a form is (a list keeps repeated fields, e.g. ticked chains)."""
        pairs = list(data.items()) if isinstance(data, dict) else data
        form = {"content-type": "application/x-www-form-urlencoded"}
        return await self._send("POST", path, form, content=urlencode(pairs))

    async def _send(
        self, method: str, path: str, headers: dict[str, str] | None = None, **kwargs: Any
    ) -> httpx.Response:
        url = path if path.startswith("http") else f"{self.service.url}{path}"
        headers = {
            **(headers or {}),
            "cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()),
        }
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.request(method, url, headers=headers, **kwargs)
        for line in answer.headers.get_list("set-cookie"):
            parsed: SimpleCookie = SimpleCookie()
            parsed.load(line)
            for name, morsel in parsed.items():
                if morsel.value in ("", '""') or morsel["max-age"] == "0":
                    self.cookies.pop(name, None)
                else:
                    self.cookies[name] = morsel.value
        return answer


@dataclass(frozen=True, slots=True)
class PostForm:
    page: str  # the page it was found on
    action: str  # its path
    fields: tuple[tuple[str, str], ...]  # what it would send, its CSRF token included

    def without_token(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in self.fields if k != "csrf_token"]

    def with_token(self, token: str) -> list[tuple[str, str]]:
        return [*self.without_token(), ("csrf_token", token)]


@dataclass
class Crawl:
    pages: dict[str, str] = field(default_factory=dict)  # url -> HTML
    statuses: dict[str, int] = field(default_factory=dict)
    forms: dict[str, PostForm] = field(default_factory=dict)  # by action
    csp_violations: list[str] = field(default_factory=list)


_PAGE_FACTS = """() => ({
  links: [...document.querySelectorAll('a[href]')].map(a => a.href),
  forms: [...document.querySelectorAll('form')]
    .filter(f => (f.getAttribute('method') || 'get').toLowerCase() === 'post')
    .map(f => ({
      action: f.action,
      fields: [...new FormData(f)].filter(([, v]) => typeof v === 'string'),
    })),
})"""


async def crawl(page: Page, service: Service, starts: list[str]) -> Crawl:
    """Every dashboard page reachable from `starts` by links, as `page`'s viewer sees them."""
    found = Crawl()

    def on_console(message: Any) -> None:
        if "Content Security Policy" in message.text:
            found.csp_violations.append(f"{page.url}: {message.text}")

    page.on("console", on_console)
    queue = [urljoin(service.url, path) for path in starts]
    seen = set(queue)
    try:
        while queue and len(found.pages) < MAX_PAGES:
            url = queue.pop(0)
            try:
                answer = await page.goto(url)
            except PlaywrightError:
                continue  # a download, not a page
            if answer is None or "text/html" not in answer.headers.get("content-type", ""):
                continue
            found.statuses[url] = answer.status
            found.pages[url] = await page.content()
            facts = await page.evaluate(_PAGE_FACTS)
            for form in facts["forms"]:
                action = urlsplit(form["action"]).path
                fields = tuple((str(k), str(v)) for k, v in form["fields"])
                found.forms.setdefault(action, PostForm(url, action, fields))
            for link in facts["links"]:
                target = link.split("#", 1)[0]
                if _worth_following(target, service) and target not in seen:
                    seen.add(target)
                    queue.append(target)
    finally:
        page.remove_listener("console", on_console)
    return found


def _worth_following(url: str, service: Service) -> bool:
    parts = urlsplit(url)
    if f"{parts.scheme}://{parts.netloc}" != service.url:
        return False
    path = parts.path
    return (path == "/dashboard" or path.startswith("/dashboard/")) and not path.startswith(
        ("/dashboard/static/", "/dashboard/invitations/")
    )
