"""The validation mode a chain runs in: probed from what its node traces, or pinned. On real
anvil, which serves the struct logger, callTracer and prestateTracer, but not geth's native
erc7562Tracer."""

from __future__ import annotations

from dataclasses import replace

import pytest

from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.bundler.validation.modes import ValidationMode, probe_modes
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.devnet.devnet import Devnet
from entryway.errors import ConfigurationError
from tests.integration.bundler.conftest import RpcClient
from tests.integration.bundler.rules_setup import RuleContracts, deploy_rule_contracts
from tests.integration.harness import Harness
from tests.node_kinds import node_relay


async def test_anvil_serves_opcodes_and_calls_not_native(eth: EthClient) -> None:
    tracing = await probe_modes(eth.rpc)
    assert tracing.modes == {ValidationMode.OPCODES, ValidationMode.CALLS, ValidationMode.UNTRACED}
    assert tracing.strongest is ValidationMode.OPCODES
    assert any(r.startswith("native: the node refused") for r in tracing.refusals)


def _settings(devnet: Devnet, mode: ValidationMode | None) -> StandaloneSettings:
    return StandaloneSettings(
        rpc_url=devnet.chains[0].rpc_url,
        entry_point=devnet.chains[0].deployment.entry_point,
        executor_keys=(Harness.new_key(),),
        mode=BundlingMode.MANUAL,
        validation_mode=mode,
        also_entry_points=(),
    )


@pytest.mark.parametrize(
    ("pinned", "runs"),
    [
        (None, ValidationMode.OPCODES),
        (ValidationMode.CALLS, ValidationMode.CALLS),
        (ValidationMode.UNTRACED, ValidationMode.UNTRACED),
    ],
)
async def test_the_mode_is_the_strongest_served_or_the_pinned_one(
    devnet: Devnet, eth: EthClient, pinned: ValidationMode | None, runs: ValidationMode
) -> None:
    rpc = await build_bundler(eth, _settings(devnet, pinned))
    assert rpc.bundler.validator.mode is runs
    assert all(b.validator.mode is runs for b in rpc.bundlers)


async def test_a_pinned_mode_the_node_cannot_serve_stops_the_start(
    devnet: Devnet, eth: EthClient
) -> None:
    with pytest.raises(ConfigurationError, match="validation_mode native is pinned") as refused:
        await build_bundler(eth, _settings(devnet, ValidationMode.NATIVE))
    assert "serves opcodes at most" in str(refused.value)


@pytest.fixture(scope="module")
async def rules(harness: Harness) -> RuleContracts:
    return await deploy_rule_contracts(harness)


async def test_the_mode_follows_a_failover_to_a_weaker_node(
    devnet: Devnet, rules: RuleContracts
) -> None:
    """Reads fail over from a node with the struct logger to a hosted one: the next op is
    validated in `calls` mode (the new node probed); with `opcodes` pinned, ops are refused
    while that node answers."""
    upstream = devnet.chains[0].rpc_url
    async with node_relay(upstream, "hosted") as hosted:
        for pinned in (None, ValidationMode.OPCODES):
            async with (
                node_relay(upstream, "anvil") as first,
                JsonRpcClient([first.url, hosted.url]) as rpc,
            ):
                settings = replace(_settings(devnet, pinned), accountable_ops=True)
                bundler_rpc = await build_bundler(EthClient(rpc), settings)
                bundler = bundler_rpc.bundler
                client = RpcClient(bundler_rpc, bundler.config.entry_point)
                assert bundler.validator.mode is ValidationMode.OPCODES
                await first.stop()  # the preferred node goes away
                if pinned is None:
                    assert await client.send(await rules.account_op(""))
                    assert bundler.validator.mode is ValidationMode.CALLS
                    assert hosted.calls["debug_traceCall"] > 0
                    continue
                refused = await client.send_error(await rules.account_op(""))
                assert refused["code"] == -32603, refused
                assert "validation_mode opcodes is pinned" in refused["message"], refused
