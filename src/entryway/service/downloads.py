"""Stored documents go back as downloads, never as pages of the API's origin.

A document is whatever a client uploaded: served with its own media type, an HTML or SVG
upload would run as a page of this origin, next to the API and its keys. So the answer is
`application/octet-stream` as an attachment, with `nosniff` (no guessing a type from the
bytes) and a CSP that gives the bytes no origin and no scripts even if a browser renders them.
The uploaded media type stays in the notarization's `contentType`.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from fastapi.responses import Response

DOWNLOAD_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
}
# RFC 5987 attr-char beyond letters, digits and "-._~" (which `quote` keeps anyway).
_ATTR_CHAR_EXTRA = "!#$&+^`|"
_NOT_PLAIN = re.compile(r"[^A-Za-z0-9._ ()+-]")


def attachment(content: bytes, filename: str | None, fallback: str) -> Response:
    headers = {**DOWNLOAD_HEADERS, "Content-Disposition": content_disposition(filename, fallback)}
    return Response(content, media_type="application/octet-stream", headers=headers)


def content_disposition(filename: str | None, fallback: str) -> str:
    """`attachment` with the name twice (RFC 6266): a plain-ASCII `filename` for old
    clients and the exact name, UTF-8 and percent-encoded, in `filename*` (RFC 8187).
    Neither can carry a quote, a CR or LF, or a directory."""
    name = _base_name(filename)
    if not name.strip(" ."):  # nothing left, or only "." and ".."
        name = fallback
    plain = _NOT_PLAIN.sub("_", name).strip(" .") or fallback
    exact = quote(name, safe=_ATTR_CHAR_EXTRA)
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{exact}"


def _base_name(filename: str | None) -> str:
    """The last path segment, without control characters: an uploaded name is only a hint."""
    if not filename:
        return ""
    last = re.split(r"[/\\]", filename)[-1]
    return "".join(c for c in last if c.isprintable())[:200].strip()
