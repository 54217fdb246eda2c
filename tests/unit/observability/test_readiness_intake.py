"""An API process of a chain bundled from the intake holds no executor key: its readiness
has no executor check (the chain's bundler leader holds the keys), and is not failed by one."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from entryway.bundler.validation.modes import ValidationMode
from entryway.observability.readiness import Readiness
from entryway.service.readiness_checks import ReadinessSettings, service_checks
from entryway.service.services import ChainRuntime, Services
from tests.unit.observability.test_readiness import FakeEth

OPCODES = SimpleNamespace(mode=ValidationMode.OPCODES)  # the validator the node allows


async def test_a_chain_without_executor_keys_here_has_no_executor_check() -> None:
    services = Services()
    rpc = SimpleNamespace(bundler=SimpleNamespace(executors=[], validator=OPCODES))
    services.chains[84532] = ChainRuntime(
        84532, "https://node.example.org", cast(Any, None), cast(Any, rpc),
        cast(Any, FakeEth(84532, 0)),
    )  # fmt: skip
    report = await Readiness(lambda: service_checks(services, ReadinessSettings())).report()
    names = {c.name for c in report.checks}
    assert "chain.84532.rpc" in names
    assert "chain.84532.executors" not in names
    assert report.failing == ["database"]  # not started here; the chain itself is ready
