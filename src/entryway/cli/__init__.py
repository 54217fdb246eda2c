"""The `entryway` command line: one typer app, its commands in the order `--help` lists
them. The commands live beside each other in this package (the service's processes in
`service`, the chain's in `chain`, the bundler's in `bundler`); the groups (`paymaster`,
`config`, `operator`) beside the code they drive."""

from __future__ import annotations

import typer

from entryway.cli.bundler import bundler
from entryway.cli.chain import addresses, deploy, devnet, networks
from entryway.cli.service import api, serve, up, verify, worker
from entryway.dashboard.operator_commands import operator_app
from entryway.paymaster.commands import paymaster_app
from entryway.settings.commands import config_app, migrate

app = typer.Typer(
    name="entryway",
    help="Self-hostable ERC-4337 infrastructure: bundler, paymaster, wallets, notary.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(paymaster_app)
app.add_typer(config_app)
app.add_typer(operator_app)
for command in (
    devnet,
    up,
    api,
    serve,
    migrate,
    deploy,
    addresses,
    bundler,
    verify,
    worker,
    networks,
):
    app.command()(command)


def main() -> None:
    app()
