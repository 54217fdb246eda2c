"""What the `entryway` commands share: their JSON output, running a coroutine to its end with
an `EntrywayError` told in one line, and waiting for SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from entryway.errors import EntrywayError

DataDir = Annotated[Path, typer.Option("--data-dir", help="Where state and devnet keys live.")]


def parse_chains(value: str) -> list[int]:
    try:
        return [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise typer.BadParameter(f"not a comma-separated list of chain ids: {value!r}") from None


def emit(obj: object) -> None:
    """One JSON line on stdout."""
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


async def until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def run(coro: object) -> None:
    """Run `coro` to its end; an `EntrywayError` is one red line and exit status 1."""
    try:
        asyncio.run(coro)  # type: ignore[arg-type]
    except EntrywayError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
