"""The keys page's name and allowlist fields: entries one per line or comma-separated, kept
in canonical form; a wrong entry, too long a name or too many entries refused with the field
it is about, in plain words."""

from __future__ import annotations

import pytest

from entryway.dashboard.key_form import KeyFieldError, KeyFields, checked


def test_entries_are_split_and_canonical() -> None:
    name, allowlist = checked(
        KeyFields(
            "Web app",
            "HTTPS://App.Example.com/\nhttps://b.example, https://b.example",
            "10.1.2.3/8",
        )
    )
    assert name == "Web app"
    assert allowlist.origins == ("https://app.example.com", "https://b.example")
    assert allowlist.client_addresses == ("10.0.0.0/8",)
    name, allowlist = checked(KeyFields())
    assert (name, allowlist.origins, allowlist.client_addresses) == ("", (), ())


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        (KeyFields("x" * 101), "name", "Use at most 100 characters"),
        (KeyFields(origins="app.example.com"), "allowed_origins", "is not an origin"),
        (KeyFields(origins="https://a.example/path"), "allowed_origins", "no path"),
        (KeyFields(clients="10.0.0.300"), "allowed_clients", "not an IP address"),
        (
            KeyFields(clients="\n".join(f"10.0.0.{n}" for n in range(51))),
            "allowed_clients",
            "At most 50 origins",
        ),
    ],
)
def test_a_wrong_entry_names_its_field(fields: KeyFields, field: str, says: str) -> None:
    with pytest.raises(KeyFieldError) as refused:
        checked(fields)
    assert refused.value.problem.field == field
    assert says in refused.value.problem.text
    assert refused.value.problem.text.endswith(".")
