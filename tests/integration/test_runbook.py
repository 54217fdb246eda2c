"""docs/deploy.md's runbook, run as written: the document's own commands, read out of it, so
the two cannot drift.

The runbook marks what it runs: ```sh runbook-settings (the values an operator edits, the
only lines this test replaces: install prefix, directories, node URL, database, Redis,
ports), ```sh runbook (a step, run to completion in bash), ```sh runbook-service (one
long-running process a line, left running), ```python runbook (the SDK snippet) and
<!-- runbook-manual: NAME --> (a step done outside Entryway, done here by the test: `fund`
gives the key files' addresses ether on the node). Against a plain anvil this test starts
as the document's chain, on a fresh PostgreSQL database and Redis, the steps go from key
files to a sponsored op included on chain: about a minute here."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from eth_account import Account

from entryway.bundler.receipts import USER_OP_EVENT
from entryway.deploy.plan import Operator, plan_deployment
from entryway.devnet.anvil import AnvilConfig, AnvilProcess
from entryway.domain.evm import to_hex
from tests.integration.postgres import fresh_database
from tests.integration.test_config_processes import _clean_environment, _free_port

pytestmark = pytest.mark.anvil

DOC = Path(__file__).parents[2] / "docs" / "deploy.md"
REDIS_URL = os.environ.get("ENTRYWAY_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
FENCE = re.compile(r"^```(\w+)(?: ([\w-]+))?\n(.*?)^```$", re.MULTILINE | re.DOTALL)
MANUAL = re.compile(r"^<!-- runbook-manual: ([\w-]+) -->$", re.MULTILINE)
KINDS = {
    ("sh", "runbook-settings"): "settings",
    ("sh", "runbook"): "sh",
    ("sh", "runbook-service"): "service",
    ("python", "runbook"): "python",
}
STEP_TIMEOUT_S = 180  # generous: a loaded machine starts processes slowly


@dataclass(frozen=True)
class Step:
    kind: str  # settings, sh, service, python, manual
    text: str


def runbook_steps(doc: str) -> list[Step]:
    """The marked blocks and manual steps, in the document's order."""
    found: list[tuple[int, Step]] = []
    for fence in FENCE.finditer(doc):
        language, marker, body = fence.groups()
        if marker is None or not marker.startswith("runbook"):
            continue
        assert (language, marker) in KINDS, f"a runbook block this test cannot run: {marker}"
        found.append((fence.start(), Step(KINDS[language, marker], body)))
    found += [(m.start(), Step("manual", m.group(1))) for m in MANUAL.finditer(doc)]
    return [step for _, step in sorted(found, key=lambda pair: pair[0])]


def settings_value(block: str, name: str) -> str:
    match = re.search(rf"^export {name}=(\S+)$", block, re.MULTILINE)
    assert match, f"the runbook's settings have no {name}"
    return match.group(1)


def substituted(block: str, values: dict[str, str]) -> str:
    """The settings block with this machine's values: every literal `export NAME=value`
    must be one the test fills (a new placeholder fails here, not silently)."""
    lines, used = [], set()
    for line in block.splitlines():
        match = re.match(r"export (\w+)=(.*)$", line)
        if match and match.group(1) in values:
            name = match.group(1)
            line = f"export {name}={shlex.quote(values[name])}"
            used.add(name)
        elif match:
            assert "$" in match.group(2), f"a runbook value this test does not fill: {line}"
        lines.append(line)
    assert used == set(values), f"the runbook no longer sets {set(values) - used}"
    return "\n".join(lines)


@dataclass
class Machine:
    """What the runbook's commands run against: the settings, the node, the processes."""

    settings: str
    rpc_url: str
    root: Path
    conf: Path
    services: list[asyncio.subprocess.Process]

    def script(self, body: str) -> list[str]:
        return ["bash", "-c", f"set -euo pipefail\n{self.settings}\n{body}"]

    async def run(self, body: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            *self.script(body), cwd=self.root, env=_clean_environment(),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), STEP_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise AssertionError(f"runbook step timed out:\n{body}\n{self.logs()}") from None
        text = out.decode()
        assert proc.returncode == 0, (
            f"runbook step failed ({proc.returncode}):\n{body}\n{text}\n{self.logs()}"
        )
        return text

    async def start(self, line: str) -> None:
        log = self.root / "logs" / f"service-{len(self.services)}.log"
        with log.open("wb") as sink:
            proc = await asyncio.create_subprocess_exec(
                *self.script(f"exec {line}"), cwd=self.root, env=_clean_environment(),
                stdout=sink, stderr=sink,
            )  # fmt: skip
        self.services.append(proc)

    def logs(self) -> str:
        """The tail of each running process's output, for a failure's message."""
        files = sorted((self.root / "logs").glob("*.log"))
        return "\n".join(f"--- {path.name}\n{path.read_text()[-3000:]}" for path in files)

    async def fund(self) -> None:
        """What an operator does from a wallet: ether to every key the runbook made."""
        async with httpx.AsyncClient() as http:
            for path in sorted((self.conf / "keys").glob("*.key")):
                address = Account.from_key(path.read_text().strip()).address
                answer = await http.post(self.rpc_url, json={
                    "jsonrpc": "2.0", "id": 1, "method": "anvil_setBalance",
                    "params": [address, hex(10 * 10**18)],
                })  # fmt: skip
                assert "error" not in answer.json(), answer.text

    async def stop(self) -> None:
        for proc in self.services:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.services:
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()


@pytest.fixture
async def machine(tmp_path: Path) -> AsyncIterator[Machine]:
    steps = runbook_steps(DOC.read_text())
    settings = [s.text for s in steps if s.kind == "settings"]
    assert len(settings) == 1, "the runbook has one settings block"
    chain_id = settings_value(settings[0], "CHAIN_ID")
    node = AnvilProcess(AnvilConfig(chain_id=int(chain_id)))
    await node.start()
    try:
        async with fresh_database("the runbook") as (database_url, _):
            conf, state = tmp_path / "etc", tmp_path / "state"
            for directory in (conf, state, tmp_path / "logs"):
                directory.mkdir(mode=0o700)  # what the runbook's install step does as root
            values = {
                "INSTALL_DIR": str(Path(sys.executable).parent.parent),
                "CONF_DIR": str(conf),
                "STATE_DIR": str(state),
                "CHAIN_ID": chain_id,
                "RPC_URL": node.rpc_url,
                "DATABASE_URL": database_url,
                "REDIS_URL": REDIS_URL,
                "API_PORT": str(_free_port()),
                "WORKER_HTTP_PORT": str(_free_port()),
                "BUNDLER_HTTP_PORT": str(_free_port()),
                "STANDBY_HTTP_PORT": str(_free_port()),
            }
            box = Machine(substituted(settings[0], values), node.rpc_url, tmp_path, conf, [])
            try:
                yield box
            finally:
                await box.stop()
    finally:
        await node.stop()


async def test_the_runbook_goes_from_key_files_to_a_sponsored_op_on_chain(
    machine: Machine,
) -> None:
    printed = ""
    for step in runbook_steps(DOC.read_text()):
        if step.kind == "sh":
            printed = await machine.run(step.text)
        elif step.kind == "service":
            for line in step.text.splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    await machine.start(line)
        elif step.kind == "python":
            script = machine.root / "sponsored_op.py"
            script.write_text(step.text)
            printed = await machine.run(f"exec python {shlex.quote(str(script))}")
        elif step.kind == "manual":
            assert step.text == "fund", f"a manual runbook step this test cannot do: {step.text}"
            await machine.fund()
        for proc in machine.services:  # a process that died at its start fails here
            assert proc.returncode is None, machine.logs()

    # The last step printed the op; the chain says the service's paymaster paid for it.
    outcome = json.loads(printed.strip().splitlines()[-1])
    assert outcome["success"] is True, (outcome, machine.logs())
    keys = machine.conf / "keys"
    signer, notary, owner = (
        Account.from_key((keys / f"{name}.key").read_text().strip()).address
        for name in ("signer", "notary", "operator")
    )
    paymaster = plan_deployment(Operator(owner, signer, notary)).paymaster.address
    async with httpx.AsyncClient() as http:
        answer = await http.post(machine.rpc_url, json={
            "jsonrpc": "2.0", "id": 1, "method": "eth_getTransactionReceipt",
            "params": [outcome["transactionHash"]],
        })  # fmt: skip
    receipt = answer.json()["result"]
    assert receipt["status"] == "0x1"
    (event,) = [
        log
        for log in receipt["logs"]
        if log["topics"][0] == to_hex(USER_OP_EVENT) and log["topics"][1] == outcome["userOpHash"]
    ]
    assert int(event["topics"][3], 16) == int(paymaster, 16)  # sponsored by our paymaster
    assert int(event["data"][66:130], 16) == 1  # its success flag, after the nonce

    # The bundler's file holds no paymaster signer nor notary key: fine for a bundler, whose
    # check shows the executors to fund, ...
    bundler_file = machine.conf / "bundler.toml"
    checked = await machine.run(
        f"entryway config check --config {shlex.quote(str(bundler_file))} --for bundler"
    )
    executor = Account.from_key((keys / "executor.key").read_text().strip()).address
    assert f"executors  {executor}" in checked, checked
    assert "redis" not in checked and checked.strip().endswith("ok"), checked
    # ... but not for the API, which signs sponsorships and anchors notarizations.
    checked = await machine.run(
        f"entryway config check --config {shlex.quote(str(bundler_file))} --for api || echo exit=$?"
    )
    assert "exit=2" in checked, checked
    assert "chains[0].paymaster: no paymaster signer key" in checked
    assert "chains[0].notary_submitter_key_file: the API and the worker need it" in checked
    # ... and a bundler's check wants what a bundler uses: its executor keys.
    keyless = machine.conf / "bundler-keyless.toml"
    keyless.write_text(
        re.sub(
            r"(?m)^executor_key_files = .*$", "executor_key_files = []", bundler_file.read_text()
        )
    )
    checked = await machine.run(
        f"entryway config check --config {shlex.quote(str(keyless))} --for bundler || echo exit=$?"
    )
    assert "exit=2" in checked, checked
    assert re.search(
        r"chains\[0\]\.executor_key_files: chain \d+'s bundler needs at least one", checked
    )


def test_every_unit_leaves_the_migration_to_its_one_shot_unit() -> None:
    """The schema is migrated once per release, not at every replica's start."""
    doc = DOC.read_text()
    units = [body for language, _, body in FENCE.findall(doc) if language == "ini"]
    serving = [u for u in units if re.search(r"entryway (api|worker|bundler)\b", u)]
    assert len(serving) >= 3, "the api, worker and bundler units"
    for unit in serving:
        assert not re.search(r"^Exec\w*=.*\bmigrate\b", unit, re.MULTILINE), unit
    (migrating,) = [u for u in units if re.search(r"ExecStart=\S+ migrate\b", u)]
    assert "Type=oneshot" in migrating
