"""JSON bodies as RFC 8259 defines them, and no deeper than the service allows.

Why not `json.loads`: the stdlib decoder recurses in C once per nesting level and is held
back only by Python's recursion limit, which `py_ecc` raises to 100,000 when imported; a body
nested that deep then overflows the C stack and kills the process. It also accepts `NaN`,
`Infinity` and numbers such as `1e400` that become `inf`, which later serialise as `null`:
what the service stores would differ from what the client sent.

So a body is first measured without any recursion (`nesting_depth`), then decoded by orjson,
which follows the RFC strictly (no NaN or Infinity, no number beyond a double's range, UTF-8
only, no lone surrogates) and bounds its own recursion whatever Python's limit is."""

from __future__ import annotations

import re
from itertools import accumulate
from typing import Any

import orjson
from starlette.responses import JSONResponse, Response

JSON_TYPE = "application/json"

# `\` and the character it escapes; `"` and what lies up to the next `"`. Escapes go first so
# that every `"` left is a string's edge. Both patterns scan once, without backtracking.
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"')
_NOT_A_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class JsonRefusedError(ValueError):
    """A body the service does not decode; `code` is the stable problem code."""

    code = "invalid_json"


class InvalidJsonError(JsonRefusedError):
    code = "invalid_json"


class JsonTooDeepError(JsonRefusedError):
    code = "json_too_deep"


def nesting_depth(data: bytes) -> int:
    """How deeply arrays and objects nest in a JSON text, brackets inside strings aside.

    Exact for valid JSON; for anything else it may be off, which is harmless because the
    decoder refuses such text anyway. Runs in C-level passes (regex, translate, accumulate),
    linear in the size of the body."""
    bare = _STRING.sub(b"", _ESCAPE.sub(b"", data))
    brackets = bare.translate(None, _NOT_A_BRACKET)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def too_deep(data: bytes, max_depth: int) -> bool:
    # Fewer opening brackets than the limit cannot nest past it: most bodies stop here.
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return False
    return nesting_depth(data) > max_depth


def loads(data: bytes, max_depth: int) -> Any:
    """The decoded body, or JsonTooDeepError / InvalidJsonError."""
    if too_deep(data, max_depth):
        raise JsonTooDeepError(f"arrays and objects may nest at most {max_depth} levels deep")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidJsonError(f"the body is not valid JSON: {exc}") from None


def json_response(
    body: Any, status_code: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """`body` as a JSON answer, encoded by orjson: the JSON-RPC route answers hundreds of
    receipt polls a second, and the stdlib encoder Starlette's JSONResponse uses costs several
    times as much. What orjson refuses (an integer past 64 bits, a key that is not a string)
    is encoded as JSONResponse would."""
    try:
        content = orjson.dumps(body)
    except orjson.JSONEncodeError:
        return JSONResponse(body, status_code=status_code, headers=headers)
    return Response(content, status_code=status_code, headers=headers, media_type=JSON_TYPE)
