"""The security headers every response carries, chosen by path.

API answers are JSON that no browser should render, frame, sniff or share across origins:
their Content-Security-Policy allows nothing at all. The interactive documentation (FastAPI's
Swagger UI at /docs and ReDoc at /redoc) is the exception: those pages load their scripts and
styles from the jsDelivr CDN, Swagger UI starts from an inline script, ReDoc takes Google Fonts
and runs a worker from a blob, and both fetch /openapi.json from this origin. Their policy
allows exactly that. `'unsafe-inline'` is tolerable there because those pages echo nothing a
request sends; every other path keeps `default-src 'none'`.

The dashboard (/dashboard) is served whole by this origin: its pages may load scripts, styles
and images from here and nowhere else, post forms here only, and run no inline script. Its
pages are never stored by a cache (they show project data; the page that shows a new key
shows its secret); its static assets under /dashboard/static may be.

Answers under /v1/keys and /v1/admin show secrets or operator data: they are never stored by
a cache (`Cache-Control: no-store`), whatever the route set."""

from __future__ import annotations

from collections.abc import Collection

API_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
DOCS_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'unsafe-inline' https://cdn.jsdelivr.net",
        "style-src 'unsafe-inline' https://cdn.jsdelivr.net https://fonts.googleapis.com",
        "font-src https://fonts.gstatic.com",
        "img-src 'self' data: https://fastapi.tiangolo.com https://cdn.redoc.ly",
        "connect-src 'self'",
        "worker-src blob:",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'none'",
    )
)
DASHBOARD = "/dashboard"
DASHBOARD_STATIC = "/dashboard/static/"
DASHBOARD_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    )
)
ALWAYS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Resource-Policy": "same-origin",
}
NO_STORE_PREFIXES = ("/v1/keys", "/v1/admin")


def security_headers(path: str, docs_paths: Collection[str] = ()) -> dict[str, str]:
    """The headers for a response to `path`; `docs_paths` are the documentation pages."""
    headers = dict(ALWAYS)
    dashboard = path == DASHBOARD or path.startswith(DASHBOARD + "/")
    if dashboard:
        headers["Content-Security-Policy"] = DASHBOARD_POLICY
    else:
        headers["Content-Security-Policy"] = DOCS_POLICY if path in docs_paths else API_POLICY
    no_store = any(path == p or path.startswith(p + "/") for p in NO_STORE_PREFIXES)
    if no_store or (dashboard and not path.startswith(DASHBOARD_STATIC)):
        headers["Cache-Control"] = "no-store"
    return headers
