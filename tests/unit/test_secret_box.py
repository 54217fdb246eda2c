"""Secrets at rest (pure, plus the key's file): AES-256-GCM sealing that fits the secret
columns, opens only under the right key and in the right place, and never shows the key."""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from entryway.domain.webhooks import new_secret, secret_key
from entryway.storage.secret_box import SecretBox, SecretsKeyError, key_id, parse_key
from entryway.storage.secrets_key import KEY_FILE_NAME, SecretsKeySource
from entryway.storage.webhook_secrets import open_secret, seal_secret

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))


@pytest.fixture
def usual_umask() -> Iterator[None]:
    """The common 022, under which files are made readable by all unless made otherwise."""
    before = os.umask(0o022)
    yield
    os.umask(before)


@given(st.binary(max_size=64), st.text(max_size=40))
def test_what_is_sealed_opens_to_the_same_bytes_in_the_same_place(
    plaintext: bytes, context: str
) -> None:
    box = SecretBox(KEY)
    sealed = box.seal(plaintext, context)
    assert sealed.startswith(f"v1:{key_id(KEY)}:") and box.is_current(sealed)
    assert box.open(sealed, context) == plaintext
    assert box.seal(plaintext, context) != sealed  # a fresh nonce each time


def test_a_sealed_webhook_secret_hides_it_and_fits_its_column() -> None:
    box = SecretBox(KEY)
    secret = new_secret()
    sealed = seal_secret(box, "endpoint-1", secret)
    key_text = secret.removeprefix("whsec_")
    assert secret not in sealed and key_text not in sealed
    assert secret_key(secret) not in base64.urlsafe_b64decode(sealed.split(":")[2] + "==")
    assert len(sealed) <= 100  # webhook_endpoints.secret is VARCHAR(100)
    assert open_secret(box, "endpoint-1", sealed) == secret
    assert open_secret(box, "endpoint-1", secret) == secret  # a row from before: in clear


def test_the_wrong_key_the_wrong_row_or_a_changed_byte_do_not_open() -> None:
    sealed = SecretBox(KEY).seal(b"secret bytes", "endpoint-1")
    with pytest.raises(SecretsKeyError) as wrong:
        SecretBox(OTHER).open(sealed, "endpoint-1")
    assert key_id(KEY) in str(wrong.value) and key_id(OTHER) in str(wrong.value)
    with pytest.raises(SecretsKeyError, match="moved from another row"):
        SecretBox(KEY).open(sealed, "endpoint-2")
    head, packed = sealed.rsplit(":", 1)
    flipped = packed[:-2] + ("A" if packed[-2] != "A" else "B") + packed[-1]
    with pytest.raises(SecretsKeyError, match="altered"):
        SecretBox(KEY).open(f"{head}:{flipped}", "endpoint-1")


def test_after_a_rotation_the_previous_key_still_opens_and_new_values_use_the_new_one() -> None:
    old_sealed = SecretBox(OTHER).seal(b"kept", "e")
    rotated = SecretBox(KEY, previous=[OTHER])
    assert rotated.open(old_sealed, "e") == b"kept"
    assert not rotated.is_current(old_sealed)
    assert rotated.is_current(rotated.seal(b"kept", "e"))


def test_the_key_never_shows_in_a_repr_or_an_error() -> None:
    text = base64.b64encode(KEY).decode()
    assert text not in repr(SecretBox(KEY)) and text not in repr(SecretsKeySource(key=text))
    for bad in ("not base64!", base64.b64encode(b"short").decode()):
        with pytest.raises(SecretsKeyError) as error:
            parse_key(bad, "ENTRYWAY_SECRETS_KEY")
        assert bad not in str(error.value) and "ENTRYWAY_SECRETS_KEY" in str(error.value)


def test_the_key_comes_from_the_environment_a_file_or_the_data_directory(tmp_path: Path) -> None:
    text = base64.b64encode(KEY).decode()
    sealed = SecretBox(KEY).seal(b"x", "e")
    from_env = SecretsKeySource.from_env({"ENTRYWAY_SECRETS_KEY": text}).box(tmp_path)
    (tmp_path / "key").write_text(text + "\n")
    from_file = SecretsKeySource.from_env({"ENTRYWAY_SECRETS_KEY_FILE": str(tmp_path / "key")})
    for box in (from_env, from_file.box()):
        assert box.open(sealed, "e") == b"x"
    assert not (tmp_path / KEY_FILE_NAME).exists()  # a configured key makes no file
    both = {"ENTRYWAY_SECRETS_KEY": text, "ENTRYWAY_SECRETS_KEY_FILE": str(tmp_path / "key")}
    with pytest.raises(SecretsKeyError, match="not both"):
        SecretsKeySource.from_env(both).box(tmp_path)
    with pytest.raises(SecretsKeyError, match="no secrets key"):
        SecretsKeySource().box(None)


@pytest.mark.usefixtures("usual_umask")
def test_the_service_makes_its_key_once_0600_and_a_worker_only_reads_it(tmp_path: Path) -> None:
    with pytest.raises(SecretsKeyError, match="no secrets key in"):
        SecretsKeySource().box(tmp_path)  # a worker before the service ever ran
    first = SecretsKeySource().box(tmp_path, create=True)
    path = tmp_path / KEY_FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    sealed = first.seal(b"x", "e")
    for again in (SecretsKeySource().box(tmp_path, create=True), SecretsKeySource().box(tmp_path)):
        assert again.key_id == first.key_id and again.open(sealed, "e") == b"x"  # a restart
    path.chmod(0o644)
    SecretsKeySource().box(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # narrowed at start
