"""Secrets never reach a log line: the masking processor, on the shapes Entryway handles."""

from __future__ import annotations

from entryway.domain.apikeys import KeyEnvironment, issue
from entryway.observability.redaction import MASK, mask_event, mask_secrets, public_url

PRIVATE_KEY = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
TX_HASH = "0x" + "ab" * 32


def test_an_api_key_keeps_its_public_handle_and_loses_its_secret() -> None:
    issued = issue(KeyEnvironment.LIVE)
    out = mask_secrets(f"authenticating {issued.secret} failed")
    assert issued.secret not in out
    assert issued.secret.rsplit("_", 1)[1] not in out
    assert f"ew_live_{issued.key_id}_{MASK}" in out


def test_a_private_key_is_masked_bare_or_named_and_a_transaction_hash_is_kept() -> None:
    out = mask_secrets(f"executor key {PRIVATE_KEY} loaded; private key: 0x{PRIVATE_KEY}")
    assert PRIVATE_KEY not in out
    assert out.count(MASK) == 2
    sent = f"sent a bundle of 2 ops: {TX_HASH}"
    assert mask_secrets(sent) == sent


def test_bearer_tokens_and_url_credentials_are_masked() -> None:
    out = mask_secrets(
        "Authorization: Bearer s3cr3t-operator-token via "
        "https://alice:pa55word@rpc.example.org/v2/path?apikey=abc123&x=1 done"
    )
    assert "s3cr3t-operator-token" not in out
    assert "alice" not in out and "pa55word" not in out
    assert "abc123" not in out
    assert "rpc.example.org" in out and "apikey=***" in out
    basic = mask_secrets("Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l sent")
    assert "YWxhZGRpbjpvcGVuc2VzYW1l" not in basic
    assert mask_secrets("Basic sanity checks passed") == "Basic sanity checks passed"


def test_the_processor_masks_the_message_and_secret_named_fields() -> None:
    issued = issue(KeyEnvironment.TEST)
    event = {
        "event": f"key {issued.secret} used with signer {PRIVATE_KEY}",
        "private_key": "anything at all",
        "request_id": "req-1",
        "count": 3,
    }
    out = mask_event(None, "info", event)
    assert issued.secret not in out["event"] and PRIVATE_KEY not in out["event"]
    assert out["private_key"] == MASK
    assert (out["request_id"], out["count"]) == ("req-1", 3)


def test_a_public_url_shows_scheme_host_and_port_only() -> None:
    shown = public_url("https://user:pw@eth.example.org:8443/v2/KEY123?token=t0k")
    assert shown == "https://eth.example.org:8443/…?token=***"
    assert public_url("http://127.0.0.1:8545") == "http://127.0.0.1:8545"
