"""Readiness checks run together, each bounded in time, one run shared by every poll within
the cache window; a chain whose node serves another chain id is not ready. (Fake chains here;
tests/integration/test_readiness_anvil.py holds the same against a real node.)"""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any, cast

import pytest

from entryway.bundler.validation.modes import ValidationMode
from entryway.observability.readiness import NotReadyError, Readiness
from entryway.service.readiness_checks import ReadinessSettings, service_checks
from entryway.service.services import ChainRuntime, Services

OPCODES = SimpleNamespace(mode=ValidationMode.OPCODES)  # the validator the node allows


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_failing_check_names_itself_and_a_slow_one_times_out() -> None:
    async def fine() -> str:
        return "ok"

    async def broken() -> str:
        raise NotReadyError("the disk is full")

    async def leaky() -> str:
        raise OSError("cannot reach postgresql://app:hunter2@db.internal/entryway")

    async def hangs() -> str:
        await asyncio.sleep(30)
        return "never"

    checks = {"fine": fine, "broken": broken, "leaky": leaky, "hangs": hangs}
    readiness = Readiness(lambda: checks, timeout_s=0.05)
    report = await readiness.report()

    assert not report.ready
    assert report.failing == ["broken", "leaky", "hangs"]
    by_name = {c.name: c for c in report.checks}
    assert by_name["broken"].detail == "the disk is full"
    assert "hunter2" not in by_name["leaky"].detail and "db.internal" not in by_name["leaky"].detail
    assert by_name["hangs"].detail == "no answer within 0.05 s"


async def test_polls_within_the_cache_window_share_one_run() -> None:
    runs = 0

    async def counted() -> str:
        nonlocal runs
        runs += 1
        await asyncio.sleep(0.01)
        return "ok"

    clock = FakeClock()
    readiness = Readiness(lambda: {"db": counted}, cache_s=2.0, clock=clock)
    await asyncio.gather(*(readiness.report() for _ in range(20)))  # concurrent: one run
    clock.now += 1.9
    await readiness.report()
    assert runs == 1
    clock.now += 0.2
    await readiness.report()
    assert runs == 2


class FakeEth:
    def __init__(self, chain_id: int, balance: int) -> None:
        self._chain_id = chain_id
        self._balance = balance

    async def chain_id(self) -> int:
        return self._chain_id

    async def get_balance(self, address: str) -> int:
        return self._balance


def fake_chain(chain_id: int, *, serves: int, balance: int = 10**18) -> ChainRuntime:
    executor = SimpleNamespace(address="0x" + "11" * 20)
    rpc = SimpleNamespace(bundler=SimpleNamespace(executors=[executor], validator=OPCODES))
    return ChainRuntime(
        chain_id,
        "https://user:pw@node.example.org/v2/KEY",
        cast(Any, None),
        cast(Any, rpc),
        cast(Any, FakeEth(serves, balance)),
    )


async def test_a_node_serving_another_chain_or_a_poor_executor_is_not_ready() -> None:
    services = Services()
    services.chains[80002] = fake_chain(80002, serves=80002)
    services.chains[84532] = fake_chain(84532, serves=1, balance=5)
    settings = ReadinessSettings(executor_min_wei=10**16)
    report = await Readiness(lambda: service_checks(services, settings)).report()

    by_name = {c.name: c for c in report.checks}
    assert by_name["chain.80002.rpc"].ok and by_name["chain.80002.executors"].ok
    assert set(report.failing) == {"database", "chain.84532.rpc", "chain.84532.executors"}
    wrong = by_name["chain.84532.rpc"].detail
    assert wrong == "https://node.example.org/… serves chain 1, not 84532"
    assert "holds 5 wei" in by_name["chain.84532.executors"].detail


async def test_a_failing_check_is_logged_when_it_starts_failing_and_when_it_passes_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = True

    async def node() -> str:
        if down:
            raise ConnectionRefusedError("http://user:hunter2@node.internal:8545 refused")
        return "chain 84532"

    async def disk() -> str:
        raise NotReadyError("the disk is full")

    clock = FakeClock()
    readiness = Readiness(lambda: {"node": node, "disk": disk}, cache_s=1.0, clock=clock)
    caplog.set_level(logging.DEBUG, logger="entryway.observability.readiness")

    def logged(level: int) -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno == level]

    for _ in range(13):  # a load balancer polling through an outage
        clock.now += 2.0
        assert not (await readiness.report()).ready
    warnings = logged(logging.WARNING)
    assert len(warnings) == 2, warnings  # one per failing check, not one per poll
    assert any(w.startswith("readiness check disk failing: the disk is full") for w in warnings)
    assert any(
        w.startswith("readiness check node failing: ConnectionRefusedError") for w in warnings
    )
    assert "hunter2" not in " ".join(warnings)
    assert logged(logging.INFO) == []

    down = False
    for _ in range(3):
        clock.now += 2.0
        await readiness.report()
    assert logged(logging.INFO) == ["readiness check node passing again"]
    assert len(logged(logging.WARNING)) == 2

    down = True
    clock.now += 2.0
    await readiness.report()
    assert len(logged(logging.WARNING)) == 3  # a new outage is a new line
