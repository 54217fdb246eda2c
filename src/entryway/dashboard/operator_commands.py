"""`entryway operator grant|revoke EMAIL`: give a dashboard user the operator's pages (every
project, support requests, plans, network and maintenance), or take them back. The user must
have signed up; the change holds for their open sessions at once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from entryway.settings.commands import ConfigFile, fail, settings_of

operator_app = typer.Typer(
    name="operator", help="Grant or revoke the dashboard's operator role.", no_args_is_help=True
)
NO_SUCH_USER_EXIT = 1
SQLITE_FILE = "entryway.sqlite3"  # an `entryway up` data directory's database

Email = Annotated[str, typer.Argument(help="The user's email, as they signed up with it.")]
DataDirOption = Annotated[
    Path | None,
    typer.Option("--data-dir", help="The data directory of an `entryway up` (its database)."),
]


async def set_operator(database_url: str, email: str, operator: bool) -> bool:
    """Whether a user has `email` (and now has the role, or not, as asked)."""
    from entryway.storage.accounts import AccountStore
    from entryway.storage.engine import make_engine

    engine = make_engine(database_url)
    try:
        return await AccountStore(engine).set_operator(email, operator)
    finally:
        await engine.dispose()


def _run(email: str, operator: bool, config: Path | None, data_dir: Path | None) -> None:
    from entryway.domain.accounts import AccountError, normalized_email
    from entryway.settings.checks import database_url, schema_problems

    try:
        address = normalized_email(email)
    except AccountError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(NO_SUCH_USER_EXIT) from None
    settings = settings_of(config, **({"data_dir": data_dir} if data_dir is not None else {}))
    if settings.database_url is None and not (settings.data_dir / SQLITE_FILE).is_file():
        fail([f"data_dir: no database in {settings.data_dir} (give --data-dir or --config)"])
    problems = asyncio.run(schema_problems(settings))
    if problems:
        fail(problems)
    if not asyncio.run(set_operator(database_url(settings), address, operator)):
        typer.secho(
            f"error: no user has the email {address}: they sign up in the dashboard first",
            fg=typer.colors.RED,
            err=True,
        )
        raise typer.Exit(NO_SUCH_USER_EXIT)
    done = "is now an operator" if operator else "is no longer an operator"
    typer.echo(f"{address} {done}")


@operator_app.command("grant")
def grant(email: Email, config: ConfigFile = None, data_dir: DataDirOption = None) -> None:
    """Make the user an operator of this service's dashboard."""
    _run(email, True, config, data_dir)


@operator_app.command("revoke")
def revoke(email: Email, config: ConfigFile = None, data_dir: DataDirOption = None) -> None:
    """Take the operator role back from the user."""
    _run(email, False, config, data_dir)
