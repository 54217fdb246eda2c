"""Content-Disposition for stored documents: the uploaded name survives exactly in
`filename*`, and nothing in it can break out of the header or name a directory."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from entryway.service.downloads import content_disposition


def parts(value: str) -> tuple[str, str]:
    assert value.startswith('attachment; filename="')
    plain, exact = value.removeprefix('attachment; filename="').split("\"; filename*=UTF-8''")
    return plain, unquote(exact)


@pytest.mark.parametrize(
    ("uploaded", "plain", "exact"),
    [
        ("contract.pdf", "contract.pdf", "contract.pdf"),
        ("Отчёт 2026.pdf", "_____ 2026.pdf", "Отчёт 2026.pdf"),
        ('a"b.txt', "a_b.txt", 'a"b.txt'),
        ("evil\r\nSet-Cookie: x=1.html", "evilSet-Cookie_ x_1.html", "evilSet-Cookie: x=1.html"),
        ("../../etc/passwd", "passwd", "passwd"),
        ("C:\\Users\\me\\notes.txt", "notes.txt", "notes.txt"),
        ("..", "notarization-1", "notarization-1"),
        (None, "notarization-1", "notarization-1"),
        ("", "notarization-1", "notarization-1"),
    ],
)
def test_the_uploaded_name_is_kept_safely(uploaded: str | None, plain: str, exact: str) -> None:
    value = content_disposition(uploaded, "notarization-1")
    assert parts(value) == (plain, exact)
    assert value.isascii() and "\r" not in value and "\n" not in value
    assert value.count('"') == 2  # only the quotes around the plain name
