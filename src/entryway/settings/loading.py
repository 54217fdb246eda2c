"""Reading the settings: the one place Entryway reads its environment.

`load_settings(file)` takes the TOML file (`--config`, else ENTRYWAY_CONFIG), lays ENTRYWAY_*
variables over it (nested with `__`: ENTRYWAY_LIMITS__MAX_BODY_BYTES) and the documented flat
names kept from earlier releases (ENTRYWAY_MAX_BODY_BYTES, ENTRYWAY_SECRETS_KEY, ...), and
validates the whole. Every problem becomes one line naming its key (`chains[0].rpc_urls:
...`), collected into one `SettingsError`; no value is ever quoted, since it may be a secret.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import PydanticBaseSettingsSource

from entryway.errors import ConfigurationError
from entryway.settings.model import Settings

CONFIG_ENV = "ENTRYWAY_CONFIG"
ANVIL_ENV = "ENTRYWAY_ANVIL"

# Flat variable names documented before the config file existed, and where each now goes.
LEGACY_VARIABLES: Mapping[str, tuple[str, ...]] = {
    "ENTRYWAY_MAX_BODY_BYTES": ("limits", "max_body_bytes"),
    "ENTRYWAY_MAX_UPLOAD_BYTES": ("limits", "max_upload_bytes"),
    "ENTRYWAY_MAX_JSON_DEPTH": ("limits", "max_json_depth"),
    "ENTRYWAY_MAX_RPC_BATCH": ("limits", "max_rpc_batch"),
    "ENTRYWAY_MAX_RPC_BATCH_HEAVY": ("limits", "max_rpc_batch_heavy"),
    "ENTRYWAY_WEBHOOK_ALLOW_PRIVATE": ("webhooks", "allow_private"),
    "ENTRYWAY_SECRETS_KEY": ("secrets", "key"),
    "ENTRYWAY_SECRETS_KEY_FILE": ("secrets", "key_file"),
    "ENTRYWAY_SECRETS_PREVIOUS_KEYS": ("secrets", "previous_keys"),
    "ENTRYWAY_PAYMASTER_DEPOSIT_ALERT_WEI": ("paymaster", "deposit_alert_wei"),
    "ENTRYWAY_PAYMASTER_SIGNER_KEY": ("paymaster", "signer_key"),
    "ENTRYWAY_PAYMASTER_SIGNER_KEY_FILE": ("paymaster", "signer_key_file"),
}

# Whether Settings(...) reads the environment: only inside `load_settings`, so that a value
# built in code (the devnet of `up`, a test) is exactly what it says.
_reading: ContextVar[bool] = ContextVar("entryway_settings_reading", default=False)


def reading_environment() -> bool:
    return _reading.get()


@contextmanager
def _environment_read() -> Iterator[None]:
    token = _reading.set(True)
    try:
        yield
    finally:
        _reading.reset(token)


class SettingsError(ConfigurationError):
    """The settings are wrong; `problems` has one line per problem, each naming its key."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class LegacyEnvironment(PydanticBaseSettingsSource):
    """The flat ENTRYWAY_* names of LEGACY_VARIABLES, placed at their nested keys."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ does the work

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for variable, (table, key) in LEGACY_VARIABLES.items():
            raw = os.environ.get(variable)
            if raw is not None and raw.strip():
                values.setdefault(table, {})[key] = raw.strip()
        return values


def config_file_from_environment() -> Path | None:
    value = os.environ.get(CONFIG_ENV, "").strip()
    return Path(value) if value else None


def anvil_from_environment() -> Path | None:
    """ENTRYWAY_ANVIL: the anvil binary the devnet runs (a development tool, not a setting
    of the service, so it stays out of `Settings`)."""
    value = os.environ.get(ANVIL_ENV, "").strip()
    return Path(value) if value else None


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """The settings of this process: `config_file` (else ENTRYWAY_CONFIG; none: defaults)
    with the environment over it, and `overrides` (command-line options) over both."""
    file = config_file or config_file_from_environment()
    tables = read_toml(file) if file is not None else {}
    with _environment_read():
        try:
            settings = Settings(**tables)
        except ValidationError as exc:
            raise SettingsError(problems_of(exc)) from None
    if overrides:
        return with_overrides(settings, **overrides)
    return settings


def with_overrides(settings: Settings, **overrides: Any) -> Settings:
    """`settings` with top-level tables merged over (options given on the command line)."""
    data = settings.model_dump()
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    try:
        return Settings(**_revealed(data))
    except ValidationError as exc:
        raise SettingsError(problems_of(exc)) from None


def _revealed(value: Any) -> Any:
    """A model_dump() with its SecretStr values as their text again, to build anew."""
    from pydantic import SecretStr

    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, dict):
        return {k: _revealed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_revealed(v) for v in value]
    return value


def read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise SettingsError([f"config file {path}: cannot read it ({exc.strerror})"]) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError([f"config file {path}: not valid TOML ({exc})"]) from None


def problems_of(error: ValidationError) -> list[str]:
    """One line per problem: the key's path, then what is wrong (never the value given)."""
    lines = []
    for problem in error.errors(include_input=False, include_url=False):
        key = key_path(problem["loc"])
        message = str(problem["msg"]).removeprefix("Value error, ")
        variable = _variable_for(problem["loc"])
        if variable is not None:
            message += f" (from {variable})"
        lines.append(f"{key}: {message}" if key else message)
    return lines


def _variable_for(loc: tuple[int | str, ...]) -> str | None:
    """The variable that gave the value at `loc`, when one did: the operator looks there
    first, not in the file."""
    if not reading_environment() or not loc or any(isinstance(p, int) for p in loc):
        return None
    path = tuple(str(p) for p in loc)
    candidates = [v for v, at in LEGACY_VARIABLES.items() if at == path[: len(at)]]
    candidates.append("ENTRYWAY_" + "__".join(path).upper())
    candidates.append("ENTRYWAY_" + path[0].upper())  # a whole table given as JSON
    return next((v for v in candidates if os.environ.get(v, "").strip()), None)


def key_path(loc: tuple[int | str, ...]) -> str:
    """('chains', 0, 'rpc_urls') -> 'chains[0].rpc_urls'."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path
