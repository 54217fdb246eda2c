"""Operator keys: read from files (or made for a devnet), never from the database."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

from entryway.errors import ConfigurationError


def load_key_file(path: Path) -> LocalAccount:
    """A private key stored as hex (with or without 0x) in a file of its own."""
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise ConfigurationError(f"cannot read key file {path}: {exc.strerror}") from exc
    try:
        account: LocalAccount = Account.from_key(text)
    except (ValueError, TypeError):
        raise ConfigurationError(f"{path} does not hold a 32-byte hex private key") from None
    return account


def load_or_create_key(path: Path) -> LocalAccount:
    """Load the key at `path`, creating a random one (mode 0600) the first time."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("0x" + secrets.token_hex(32) + "\n")
    return load_key_file(path)
