"""Secrets out of text bound for logs and public answers. Pure.

Defence in depth: code should not log secrets in the first place; these patterns catch the
shapes Entryway handles when it slips. API keys keep their public `ew_<env>_<id>` handle (it
names the key without granting anything) and lose the secret part. A 32-byte hex string with
no 0x is masked wherever it stands: that is how private keys sit in key files and
environment variables, while transaction and operation hashes are always written with 0x. A
0x-prefixed one is masked only after a word such as "key" or "secret", because masking every
hash would make the bundler's logs useless."""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

MASK = "***"

_API_KEY = re.compile(r"\b(ew_(?:test|live)_[0-9a-f]{8})_[A-Za-z0-9_-]+")
_BEARER = re.compile(r"\b(Bearer)\s+[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
# "Basic" is an ordinary word too: masked only where it names an Authorization scheme.
_BASIC = re.compile(r"(authorization\W{1,4}Basic)\s+[A-Za-z0-9+/=]+", re.IGNORECASE)
_URL_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^/\s@]+@", re.IGNORECASE)
_URL_QUERY = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s?#]*\?)([^\s#]+)", re.IGNORECASE)
_BARE_KEY = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{64}(?![0-9A-Za-z])")
_NAMED_KEY = re.compile(
    r"((?:key|secret|private|seed|mnemonic|password|token)[^0-9\n]{0,20})"
    r"0x[0-9a-fA-F]{64}(?![0-9A-Za-z])",
    re.IGNORECASE,
)
# Field names whose values are secrets whatever they look like.
_SECRET_FIELD = re.compile(
    r"(secret|password|passwd|private_?key|api_?key|token|authorization|cookie)$", re.IGNORECASE
)


def mask_secrets(text: str) -> str:
    """`text` with every secret shape above replaced by `***`."""
    text = _API_KEY.sub(rf"\1_{MASK}", text)
    text = _BEARER.sub(rf"\1 {MASK}", text)
    text = _BASIC.sub(rf"\1 {MASK}", text)
    text = _URL_USERINFO.sub(rf"\1{MASK}@", text)
    text = _URL_QUERY.sub(lambda m: m.group(1) + _masked_query(m.group(2)), text)
    text = _NAMED_KEY.sub(rf"\g<1>{MASK}", text)
    return _BARE_KEY.sub(MASK, text)


def _masked_query(query: str) -> str:
    return "&".join(f"{part.partition('=')[0]}={MASK}" for part in query.split("&") if part)


def public_url(url: str) -> str:
    """A URL fit to show: no user or password, query values masked, the path kept only up to
    its host (hosted node providers carry the API key in the path)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    query = "&".join(f"{k}={MASK}" for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    path = "/…" if parts.path.strip("/") else ""
    return urlunsplit((parts.scheme, host + port, path, query, ""))


def mask_event(
    _logger: object, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """The structlog processor: every string in the event masked, secret-named fields
    replaced outright."""
    for name, value in event.items():
        event[name] = _masked_value(name, value)
    return event


def _masked_value(name: str, value: Any) -> Any:
    if _SECRET_FIELD.search(name) and value is not None:
        return MASK
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, Mapping):
        return {k: _masked_value(str(k), v) for k, v in value.items()}
    return value
