"""A bundle mined reverted whole, on real anvil: an op passes validation and the bundle's
eth_call, then another transaction breaks it before the bundle lands (the gap a weaker
validation mode cannot close). The op the EntryPoint names is failed with the gas it wasted
and its sender is penalised; the bundle's other op goes back to the mempool and is
included by the next bundle."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from entryway.bundler.reputation import ReputationStatus
from entryway.domain.evm import to_hex
from tests.integration.bundler.conftest import RpcClient
from tests.integration.bundler.rules_setup import RuleContracts, deploy_rule_contracts
from tests.integration.harness import Harness


@pytest.fixture(scope="module")
async def rules(harness: Harness) -> RuleContracts:
    return await deploy_rule_contracts(harness)


async def test_the_op_that_reverts_its_bundle_is_blamed_and_the_others_go_again(
    client: RpcClient,
    rules: RuleContracts,
    harness: Harness,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bundler = client.rpc.bundler
    broken = await rules.account_op("")
    fine = await rules.account_op("")
    broken_hash = await client.send(broken)
    fine_hash = await client.send(fine)
    sender = bundler.sender
    send: Callable[..., Awaitable[Any]] = sender._send

    async def broken_in_between(*args: Any) -> Any:
        # After the bundle's eth_call passed, before it is sent: the account loses its code,
        # as if a transaction ahead of the bundle in its block had changed it.
        await harness.eth.rpc.request("anvil_setCode", [broken.sender, "0xfe"])
        monkeypatch.setattr(sender, "_send", send)  # once
        return await send(*args)

    monkeypatch.setattr(sender, "_send", broken_in_between)
    monkeypatch.setattr(sender.reverted, "alert_per_hour", 1)  # the operator's alert at once
    await client.bundle()

    assert bundler.counts.bundles_reverted == 1
    status = await client.result("entryway_getUserOperationStatus", broken_hash)
    assert status["status"] == "failed", status
    assert "reverted its bundle" in status["reason"] and "AA23" in status["reason"]
    assert "wei, was spent for nothing" in status["reason"]
    assert bundler.reputation.status(broken.sender) is ReputationStatus.BANNED
    alerts = [r for r in caplog.records if r.getMessage().startswith("operator alert")]
    assert len(alerts) == 1 and "1 bundles reverted on chain in the last hour" in alerts[0].message
    # The innocent op waits for the next bundle, which includes it.
    assert bundler.mempool.get(bytes.fromhex(fine_hash[2:])) is not None
    await client.bundle()
    receipt = await client.result("eth_getUserOperationReceipt", fine_hash)
    assert receipt is not None and receipt["success"] is True
    await harness.eth.rpc.request("anvil_setCode", [broken.sender, to_hex(b"")])
