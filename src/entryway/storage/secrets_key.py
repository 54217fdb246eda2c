"""Where the key that seals secrets at rest comes from, as the operator configured it.

In order: ENTRYWAY_SECRETS_KEY (32 bytes, base64), else the file ENTRYWAY_SECRETS_KEY_FILE
names, else `<data-dir>/secrets-key`, which `entryway up` makes (0600) the first time so that
it survives restarts. ENTRYWAY_SECRETS_PREVIOUS_KEYS (comma-separated, base64) lists keys
replaced by a rotation: values sealed under them still open, and are sealed anew under the
current key at start (entryway.storage.webhook_secrets.seal_stored_secrets).

Read when a process starts (`entryway up`, `entryway worker`), never at import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from entryway.storage.private_files import FILE_MODE, narrow, write_private_file
from entryway.storage.secret_box import SecretBox, SecretsKeyError, new_key_text, parse_key

SECRETS_KEY_ENV = "ENTRYWAY_SECRETS_KEY"
SECRETS_KEY_FILE_ENV = "ENTRYWAY_SECRETS_KEY_FILE"
PREVIOUS_KEYS_ENV = "ENTRYWAY_SECRETS_PREVIOUS_KEYS"
KEY_FILE_NAME = "secrets-key"


@dataclass(frozen=True)
class SecretsKeySource:
    key: str | None = field(default=None, repr=False)  # base64 text
    key_file: Path | None = None
    previous_keys: str = field(default="", repr=False)  # base64 texts, comma-separated

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SecretsKeySource:
        file = env.get(SECRETS_KEY_FILE_ENV)
        return cls(
            key=env.get(SECRETS_KEY_ENV) or None,
            key_file=Path(file) if file else None,
            previous_keys=env.get(PREVIOUS_KEYS_ENV, ""),
        )

    def box(self, data_dir: Path | None = None, *, create: bool = False) -> SecretBox:
        """The box sealing with the configured key. Without a key or key file, the one in
        `data_dir`: made there when `create` (the service) and missing; a worker only reads
        it, so that it never seals with a key the service does not have."""
        if self.key is not None and self.key_file is not None:
            raise SecretsKeyError(f"set {SECRETS_KEY_ENV} or {SECRETS_KEY_FILE_ENV}, not both")
        previous = [
            parse_key(text, f"{PREVIOUS_KEYS_ENV} item {n}")
            for n, text in enumerate(self.previous_keys.split(","), 1)
            if text.strip()
        ]
        if self.key is not None:
            return SecretBox(parse_key(self.key, SECRETS_KEY_ENV), previous)
        if self.key_file is not None:
            return SecretBox(_read_key(self.key_file), previous)
        if data_dir is None:
            raise SecretsKeyError(
                f"no secrets key: set {SECRETS_KEY_ENV} or {SECRETS_KEY_FILE_ENV} (or give the "
                "data directory of `entryway up`, which keeps one)"
            )
        path = data_dir / KEY_FILE_NAME
        if create:
            write_private_file(path, new_key_text() + "\n")
        elif not path.exists():
            raise SecretsKeyError(
                f"no secrets key in {path}: start `entryway up` with this data directory once, "
                f"or set {SECRETS_KEY_ENV} or {SECRETS_KEY_FILE_ENV}"
            )
        narrow(path, FILE_MODE)  # a file of ours; one given by the operator is theirs to set
        return SecretBox(_read_key(path), previous)


def _read_key(path: Path) -> bytes:
    try:
        text = path.read_text()
    except OSError as exc:
        raise SecretsKeyError(f"cannot read the secrets key file {path}: {exc.strerror}") from None
    return parse_key(text, f"the secrets key file {path}")
