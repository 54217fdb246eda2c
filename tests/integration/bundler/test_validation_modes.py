"""The validation mode a chain runs in: probed from what its node traces, or pinned. On real
anvil, which serves the struct logger, callTracer and prestateTracer, but not geth's native
erc7562Tracer."""

from __future__ import annotations

import pytest

from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.bundler.validation.modes import ValidationMode, probe_modes
from entryway.chain.rpc import EthClient
from entryway.devnet.devnet import Devnet
from entryway.errors import ConfigurationError
from tests.integration.harness import Harness


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
