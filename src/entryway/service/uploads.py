"""A bounded multipart upload: one file and a few text fields, refused with 413 as soon as
the body exceeds the limit — by its Content-Length before anything is read, else while it
streams in — so an oversized upload is never read to its end."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass

from fastapi import Request
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from entryway.service.problems import Problem

# Room for the multipart framing and the text fields next to the file.
FIELDS_ALLOWANCE = 64 * 1024
MAX_FIELDS = 16


@dataclass(frozen=True, slots=True)
class Upload:
    content: bytes
    filename: str | None
    content_type: str | None
    fields: dict[str, str]


def too_large(limit: int) -> Problem:
    return Problem(
        413,
        "payload_too_large",
        "Payload too large",
        f"a document may be at most {limit} bytes",
        limit=limit,
    )


async def read_upload(request: Request, limit: int, *, file_field: str = "file") -> Upload:
    """The request's multipart form: the file in `file_field` (at most `limit` bytes) and
    its text fields. 413 beyond the limit, 422 for a form without that file."""
    body_limit = limit + FIELDS_ALLOWANCE
    declared = request.headers.get("content-length")
    if (
        declared is not None
        and declared.isascii()
        and declared.isdigit()
        and int(declared) > body_limit
    ):
        raise too_large(limit)
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise _invalid("send the document as multipart/form-data")

    async def bounded() -> AsyncGenerator[bytes, None]:
        received = 0
        async for chunk in request.stream():
            received += len(chunk)
            if received > body_limit:
                raise too_large(limit)
            yield chunk

    parser = MultiPartParser(request.headers, bounded(), max_files=1, max_fields=MAX_FIELDS)
    try:
        form = await parser.parse()
    except MultiPartException as exc:
        raise _invalid(f"malformed multipart form: {exc.message}") from None
    try:
        upload = form.get(file_field)
        if not isinstance(upload, UploadFile):
            raise _invalid(f"the form has no file field {file_field!r}")
        if upload.size is not None and upload.size > limit:
            raise too_large(limit)
        content = await upload.read()
        if len(content) > limit:
            raise too_large(limit)
        fields = {k: v for k, v in form.multi_items() if isinstance(v, str)}
        return Upload(content, upload.filename, upload.content_type, fields)
    finally:
        await form.close()


def _invalid(detail: str) -> Problem:
    return Problem(422, "validation_error", "Invalid request", detail)
