"""The JSON every body goes through: nesting measured without recursion, RFC 8259 strictly
(no NaN or Infinity, no number beyond a double), with the limits' defaults and settings."""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from entryway.domain.notarization import NotarySettings
from entryway.errors import ConfigurationError
from entryway.service import strict_json
from entryway.service.limits import RequestLimits
from entryway.service.uploads import FIELDS_ALLOWANCE


def deep(depth: int, opener: str = "[") -> bytes:
    if opener == "[":
        return ("[" * depth + "]" * depth).encode()
    return ('{"a":' * depth + "1" + "}" * depth).encode()


@pytest.mark.parametrize("opener", ["[", "{"])
def test_a_body_100000_levels_deep_is_refused_without_recursing(opener: str) -> None:
    # What py_ecc does on import: the stdlib decoder would then overflow the C stack.
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        with pytest.raises(strict_json.JsonTooDeepError) as refused:
            strict_json.loads(deep(100_000, opener), max_depth=64)
    finally:
        sys.setrecursionlimit(before)
    assert refused.value.code == "json_too_deep"
    assert strict_json.nesting_depth(deep(100_000, opener)) == 100_000


def test_depth_counts_nesting_not_brackets_and_ignores_strings() -> None:
    assert strict_json.nesting_depth(b"[]") == 1
    assert strict_json.nesting_depth(b"[[],[],{}]") == 2
    assert strict_json.nesting_depth(deep(64)) == 64
    assert strict_json.loads(deep(64), max_depth=64) == json.loads(deep(64))
    with pytest.raises(strict_json.JsonTooDeepError):
        strict_json.loads(deep(65, "{"), max_depth=64)
    # Brackets inside strings, escaped quotes included, are text, not nesting.
    text = json.dumps({"a": '[[[[\\"[[[[', "b": ["]]]]{{{{"]}).encode()
    assert strict_json.nesting_depth(text) == 2
    assert strict_json.loads(text, max_depth=2) == json.loads(text)
    many = json.dumps(["[" * 100] * 100).encode()
    assert strict_json.loads(many, max_depth=1) == ["[" * 100] * 100


@given(
    st.recursive(
        st.none() | st.integers() | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)
    )
)
def test_depth_of_any_json_value_is_its_nesting(value: object) -> None:
    def depth(v: object) -> int:
        if isinstance(v, list):
            return 1 + max(map(depth, v), default=0)
        if isinstance(v, dict):
            return 1 + max(map(depth, v.values()), default=0)
        return 0

    assert strict_json.nesting_depth(json.dumps(value).encode()) == depth(value)


@pytest.mark.parametrize(
    "body",
    [b'{"a": NaN}', b"[Infinity]", b"[-Infinity]", b"[1e400]", b"[-1e400]", b"1" + b"0" * 400],
)
def test_numbers_json_does_not_have_are_refused(body: bytes) -> None:
    # The stdlib decoder takes these and they come back out as null: what the service
    # stored would not be what the client sent.
    with pytest.raises(strict_json.InvalidJsonError) as refused:
        strict_json.loads(body, max_depth=64)
    assert refused.value.code == "invalid_json"


@pytest.mark.parametrize("body", [b"{", b"[1,]", b'"\\ud800"', b"\xff", b"{} {}"])
def test_malformed_text_is_refused(body: bytes) -> None:
    with pytest.raises(strict_json.InvalidJsonError):
        strict_json.loads(body, max_depth=64)


def test_valid_json_comes_back_as_sent() -> None:
    body = b'{"hash":"0xab","n":[1,2.5,-0.0,1e308],"ok":true,"none":null,"s":"\\u00e9"}'
    assert strict_json.loads(body, max_depth=64) == json.loads(body)


def test_limits_have_documented_defaults_and_refuse_what_is_not_a_positive_integer() -> None:
    # The settings read them from the config file or ENTRYWAY_MAX_* (tests/unit/test_settings.py).
    limits = RequestLimits()
    assert (limits.max_body_bytes, limits.max_json_depth) == (1024 * 1024, 64)
    assert (limits.max_rpc_batch, limits.max_rpc_batch_heavy) == (100, 10)
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ConfigurationError):
            RequestLimits(max_json_depth=bad)  # type: ignore[arg-type]


def test_the_upload_bound_leaves_room_for_the_largest_document() -> None:
    # The document route refuses an oversized document itself, with its own message; the
    # edge's bound for any multipart body must never cut in before it.
    document_body = NotarySettings().max_document_bytes + FIELDS_ALLOWANCE
    assert RequestLimits().max_upload_bytes > document_body
