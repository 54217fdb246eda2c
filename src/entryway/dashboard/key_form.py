"""A key's name and allowlists as the keys page's forms take them: a name, and origins and
client addresses one per line (or comma-separated), checked by the same rules as the REST
API's `/v1/keys` (`domain.key_allowlist`). A refusal names the field it is about, for the
form to show beside it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from starlette.datastructures import FormData

from entryway.dashboard import web
from entryway.dashboard.policy_errors import FieldError
from entryway.domain.key_allowlist import AllowlistError, KeyAllowlist, network, origin
from entryway.storage.apikeys import KeyInfo

MAX_NAME = 100  # as the API's KeyName
_SPLIT = re.compile(r"[\s,]+")


@dataclass(frozen=True, slots=True)
class KeyFields:
    """The form's fields as typed, shown back when something in them is refused."""

    name: str = ""
    origins: str = ""
    clients: str = ""

    @classmethod
    def posted(cls, data: FormData) -> KeyFields:
        return cls(
            web.text(data, "name", limit=MAX_NAME + 100),
            web.text(data, "allowed_origins"),
            web.text(data, "allowed_clients"),
        )

    @classmethod
    def of(cls, key: KeyInfo) -> KeyFields:
        return cls(
            key.name or "",
            "\n".join(key.allowlist.origins),
            "\n".join(key.allowlist.client_addresses),
        )


class KeyFieldError(ValueError):
    def __init__(self, problem: FieldError) -> None:
        super().__init__(problem.text)
        self.problem = problem


def _entries(text: str) -> list[str]:
    return [e for e in _SPLIT.split(text) if e]


def _plain(message: str) -> str:
    return message[:1].upper() + message[1:] + ("" if message.endswith(".") else ".")


def checked(fields: KeyFields) -> tuple[str, KeyAllowlist]:
    """The name and allowlist the fields give; KeyFieldError names the field refused."""
    if len(fields.name) > MAX_NAME:
        raise KeyFieldError(FieldError("name", f"Use at most {MAX_NAME} characters."))
    origins, clients = _entries(fields.origins), _entries(fields.clients)
    for value, check, field in [
        *((o, origin, "allowed_origins") for o in origins),
        *((c, network, "allowed_clients") for c in clients),
    ]:
        try:
            check(value)
        except AllowlistError as exc:
            raise KeyFieldError(FieldError(field, _plain(str(exc)))) from None
    try:
        return fields.name, KeyAllowlist.of(origins, clients)
    except AllowlistError as exc:  # too many entries
        field = "allowed_origins" if len(origins) > len(clients) else "allowed_clients"
        raise KeyFieldError(FieldError(field, _plain(str(exc)))) from None
