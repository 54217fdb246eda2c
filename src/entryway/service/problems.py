"""RFC 9457 problem details with a stable `code`, for every REST error."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

PROBLEM_JSON = "application/problem+json"


class Problem(Exception):  # noqa: N818 - an HTTP answer, raised
    def __init__(
        self,
        status: int,
        code: str,
        title: str,
        detail: str = "",
        *,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail or title)
        self.headers = headers or {}
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.extra = extra

    def response(self, instance: str) -> JSONResponse:
        body = {
            "type": f"https://entryway.dev/problems/{self.code}",
            "title": self.title,
            "status": self.status,
            "code": self.code,
            "detail": self.detail or self.title,
            "instance": instance,
            **self.extra,
        }
        headers = dict(self.headers)
        if self.status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        return JSONResponse(body, status_code=self.status, media_type=PROBLEM_JSON, headers=headers)


def invalid_api_key(detail: str) -> Problem:
    return Problem(401, "invalid_api_key", "Invalid API key", detail)
