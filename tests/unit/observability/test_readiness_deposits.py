"""A sponsoring chain is ready while every one of its paymasters (one per EntryPoint release)
holds its deposit floor: a v0.7 deposit not read yet, or under the floor, fails the chain's
deposit check and is named in its detail, as v0.8's would be."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from entryway.deploy.deployer import Deployment
from entryway.domain.entry_points import V07, V08
from entryway.domain.evm import checksum
from entryway.observability.readiness import Readiness
from entryway.paymaster.deposit import DepositStatus
from entryway.service.readiness_checks import ReadinessSettings, service_checks
from entryway.service.services import ChainRuntime, Services
from tests.unit.observability.test_readiness import FakeEth

CHAIN = 80002
PM08 = checksum("0x" + "a8" * 20)
PM07 = checksum("0x" + "a7" * 20)
CHECK = f"chain.{CHAIN}.paymaster_deposit"


def sponsoring_chain() -> Services:
    deployment = Deployment(
        CHAIN, V08.address, "0x" + "f1" * 20, PM08, "0x" + "f2" * 20,
        entry_point_v07=V07.address, paymaster_v07=PM07,
    )  # fmt: skip
    rpc = SimpleNamespace(bundler=SimpleNamespace(executors=[]))
    services = Services()
    services.chains[CHAIN] = ChainRuntime(
        CHAIN, "https://node.example.org", deployment, cast(Any, rpc), cast(Any, FakeEth(CHAIN, 0))
    )
    services.paymaster = cast(Any, object())  # sponsoring: the deposits are checked
    return services


async def deposit_check(services: Services, settings: ReadinessSettings) -> tuple[bool, str]:
    report = await Readiness(lambda: service_checks(services, settings)).report()
    found = {c.name: c for c in report.checks}[CHECK]
    return found.ok, found.detail


async def test_every_paymaster_of_the_chain_must_hold_the_floor() -> None:
    services = sponsoring_chain()
    settings = ReadinessSettings()
    assert await deposit_check(services, settings) == (
        False,
        f"v0.8 paymaster {PM08}: not read yet; v0.7 paymaster {PM07}: not read yet",
    )

    services.record_deposit(DepositStatus(CHAIN, V08.address, PM08, 900, 500))
    services.record_deposit(DepositStatus(CHAIN, V07.address, PM07, 499, 500))
    assert await deposit_check(services, settings) == (
        False,
        f"v0.7 paymaster {PM07}: 499 wei, under 500 wei",
    )

    services.record_deposit(DepositStatus(CHAIN, V07.address, PM07, 500, 500))
    assert await deposit_check(services, settings) == (
        True,
        f"v0.8 paymaster {PM08}: 900 wei (at least 500 wei wanted); "
        f"v0.7 paymaster {PM07}: 500 wei (at least 500 wei wanted)",
    )
    # The readiness floor, when set, replaces the alert threshold for every paymaster.
    ok, detail = await deposit_check(services, ReadinessSettings(deposit_min_wei=600))
    assert not ok and detail == f"v0.7 paymaster {PM07}: 500 wei, under 600 wei"


async def test_a_reading_of_another_chain_counts_for_none_of_this_ones() -> None:
    services = sponsoring_chain()
    services.record_deposit(DepositStatus(84532, V08.address, PM08, 900, 500))
    services.record_deposit(DepositStatus(84532, V07.address, PM07, 900, 500))
    ok, _ = await deposit_check(services, ReadinessSettings())
    assert not ok
