"""Writing a benchmark's figures into docs/benchmarks.md, between its own markers."""

from __future__ import annotations

from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def write_section(name: str, heading: str, method: str, lines: list[str]) -> None:
    """Replace the block between `<!-- name:begin -->` and `<!-- name:end -->`; the first
    time, append a section with `heading` and `method` and the block."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = DOC.read_text()
    block = "\n".join([begin, *lines, end])
    if begin in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = f"{text.rstrip()}\n\n## {heading}\n\n{method.strip()}\n\n{block}\n"
    DOC.write_text(text)
