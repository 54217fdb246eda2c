"""The fields of a notarization request, held to one set of rules whether they arrive in a
JSON body or as the text fields of a multipart upload: a `Label` (one line, at most 200
characters, no control or invisible character), metadata as a JSON object (RFC 8259 strictly,
`MetadataKey` keys, integers within 64 bits, at most 16 KiB), a chain id, a mode, a flag."""

from __future__ import annotations

import json
from typing import Any

import orjson
from pydantic import TypeAdapter, ValidationError

from entryway.domain.notarization import NotarizationMode
from entryway.service import strict_json
from entryway.service.problems import Problem
from entryway.service.schemas import Label, MetadataKey

MAX_METADATA_BYTES = 16 * 1024
_LABEL: TypeAdapter[str] = TypeAdapter(Label)
_METADATA: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[MetadataKey, Any])


def invalid(detail: str) -> Problem:
    return Problem(422, "validation_error", "Invalid request", detail)


def checked_metadata(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    """Metadata as the service can store and hash it: what orjson writes, within the limit."""
    if metadata is None:
        return None
    try:
        size = len(orjson.dumps(metadata))
    except orjson.JSONEncodeError as exc:  # e.g. an integer beyond 64 bits
        raise invalid(f"metadata: {exc}") from None
    if size > MAX_METADATA_BYTES:
        raise invalid(f"metadata: at most {MAX_METADATA_BYTES} bytes as JSON")
    return metadata


def label_field(text: str | None) -> str | None:
    """A form's `label`: a `Label`, as in a JSON body; empty is none."""
    if not text:
        return None
    try:
        return _LABEL.validate_python(text)
    except ValidationError as exc:
        raise invalid(f"label: {_first_message(exc)}") from None


def metadata_field(text: str | None, max_depth: int) -> dict[str, Any] | None:
    """A form's `metadata`: a JSON object, read as a JSON body is (RFC 8259 strictly, nested
    at most `max_depth` deep, numbers exact) and held to the body's rules; empty is none."""
    if not text:
        return None
    data = text.encode("utf-8", "surrogatepass")
    if strict_json.too_deep(data, max_depth):
        raise invalid(f"metadata: arrays and objects may nest at most {max_depth} levels deep")
    try:
        orjson.loads(data)  # RFC 8259: no NaN or Infinity, no lone surrogate, no 1e400
    except orjson.JSONDecodeError as exc:
        raise invalid(f"metadata: not valid JSON ({exc})") from None
    # Valid and shallow: the stdlib keeps integers exact, where orjson would turn one past
    # 64 bits into a float; checked_metadata then refuses it, as for a JSON body.
    value = json.loads(text)
    if value is None:  # as `"metadata": null` in a JSON body
        return None
    if not isinstance(value, dict):
        raise invalid("metadata: a JSON object")
    try:
        metadata = _METADATA.validate_python(value)
    except ValidationError as exc:
        raise invalid(f"metadata: a key: {_first_message(exc)}") from None
    return checked_metadata(metadata)


def chain_field(text: str | None) -> int:
    if text is None or not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 2**53:
        raise invalid("chainId: a chain id (a positive integer) is required")
    return int(text)


def mode_field(text: str | None) -> NotarizationMode:
    try:
        return NotarizationMode(text or NotarizationMode.BATCHED.value)
    except ValueError:
        raise invalid("mode: 'batched' or 'direct'") from None


def flag_field(text: str | None) -> bool:
    if text is None or text.lower() in ("", "false", "0"):
        return False
    if text.lower() in ("true", "1"):
        return True
    raise invalid("store: true or false")


def header_text(text: str | None, limit: int) -> str | None:
    """A filename or media type from the upload, as much as the columns hold."""
    if not text:
        return None
    return text.replace("\x00", "")[:limit] or None


def _first_message(exc: ValidationError) -> str:
    # The message only: its location would repeat the offending key, control characters
    # and all.
    return str(exc.errors()[0]["msg"])


DOCUMENT_FORM: dict[str, Any] = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["file", "chainId"],
                "properties": {
                    "file": {"type": "string", "format": "binary"},
                    "chainId": {"type": "integer"},
                    "mode": {"type": "string", "enum": ["batched", "direct"]},
                    "label": {
                        "type": "string",
                        "maxLength": 200,
                        "description": "one line, no control or invisible characters",
                    },
                    "metadata": {
                        "type": "string",
                        "description": "a JSON object, as `metadata` in a JSON request",
                    },
                    "store": {
                        "type": "boolean",
                        "description": "keep the document (default false)",
                    },
                },
            }
        }
    },
}
