"""A key's allowlists: origins and client addresses checked, written canonically, and
matched the way browsers and sockets report them."""

from __future__ import annotations

import pytest

from entryway.domain.key_allowlist import ANYWHERE, AllowlistError, KeyAllowlist


def test_entries_are_kept_canonical_and_once() -> None:
    allow = KeyAllowlist.of(
        ["https://App.example.com", "https://app.example.com/", "http://localhost:5173"],
        ["2001:db8::1/32", "192.168.1.7"],
    )
    assert allow.origins == ("https://app.example.com", "http://localhost:5173")
    assert allow.client_addresses == ("2001:db8::/32", "192.168.1.7/32")
    assert KeyAllowlist.from_columns(**_columns(allow)) == allow


def _columns(allow: KeyAllowlist) -> dict[str, str | None]:
    columns = allow.to_columns()
    return {"origins": columns["allowed_origins"], "clients": columns["allowed_clients"]}


@pytest.mark.parametrize(
    ("origins", "clients"),
    [
        (["ftp://app.example.com"], []),
        (["https://user@app.example.com"], []),
        (["https://app.example.com/?x=1"], []),
        ([], ["example.com"]),
        ([], ["10.0.0.0/33"]),
        ([f"https://a{i}.example.com" for i in range(51)], []),
    ],
)
def test_what_is_not_an_origin_or_address_is_refused(
    origins: list[str], clients: list[str]
) -> None:
    with pytest.raises(AllowlistError):
        KeyAllowlist.of(origins, clients)


def test_requests_are_matched_against_both_lists() -> None:
    allow = KeyAllowlist.of(["https://app.example.com"], ["10.0.0.0/8", "2001:db8::/32"])
    assert allow.refusal("https://app.example.com", "10.9.8.7") is None
    assert allow.refusal("HTTPS://APP.EXAMPLE.COM", "2001:db8::5") is None
    assert allow.refusal("null", "10.9.8.7") is not None  # a file:// page, sandboxed frame
    assert allow.refusal(None, "10.9.8.7") is not None
    assert allow.refusal("https://app.example.com", "11.0.0.1") == (
        "client_not_allowed",
        "client address 11.0.0.1 is not on this key's allowlist",
    )
    assert allow.refusal("https://app.example.com", None) is not None
    assert ANYWHERE.refusal(None, None) is None
