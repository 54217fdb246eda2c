from __future__ import annotations

import pytest

from entryway.domain.networks import (
    DEFAULT_DEVNET_CHAINS,
    NETWORKS,
    OP_STACK_GAS_PRICE_ORACLE,
    PROVIDER_REQUIREMENTS,
    ChainFamily,
    UnknownNetworkError,
    by_name,
    network,
)
from entryway.errors import EntrywayError


def test_the_four_required_networks() -> None:
    assert {n.chain_id: n.name for n in NETWORKS.values()} == {
        137: "polygon-mainnet",
        80002: "polygon-amoy",
        8453: "base-mainnet",
        84532: "base-sepolia",
    }
    assert [n.chain_id for n in NETWORKS.values() if n.is_testnet] == [80002, 84532]


def test_each_family_has_its_token_and_explorers() -> None:
    polygon = [n for n in NETWORKS.values() if n.family is ChainFamily.POLYGON]
    base = [n for n in NETWORKS.values() if n.family is ChainFamily.BASE]
    assert {n.native_token.symbol for n in polygon} == {"POL"}
    assert {n.native_token.symbol for n in base} == {"ETH"}
    explorers = [n.explorer_url for n in NETWORKS.values()]
    assert len(set(explorers)) == 4
    assert network(84532).explorer_tx_url("0xabc") == "https://sepolia.basescan.org/tx/0xabc"


def test_fee_rules_live_with_the_chain() -> None:
    for chain_id in (137, 80002):
        assert network(chain_id).fee_rules.min_priority_fee_per_gas == 25 * 10**9
        assert not network(chain_id).is_l2
    for chain_id in (8453, 84532):
        assert network(chain_id).is_l2
        assert network(chain_id).fee_rules.l1_gas_price_oracle == OP_STACK_GAS_PRICE_ORACLE


def test_unknown_chain_is_an_entryway_error() -> None:
    with pytest.raises(UnknownNetworkError) as info:
        network(1)
    assert isinstance(info.value, EntrywayError)
    assert info.value.chain_id == 1
    assert by_name("base-sepolia").chain_id == 84532


def test_devnet_defaults_are_the_testnets() -> None:
    assert DEFAULT_DEVNET_CHAINS == (80002, 84532)


def test_each_network_names_its_teams_public_rpc_with_its_limits() -> None:
    official = {
        137: "https://polygon-rpc.com",
        80002: "https://rpc-amoy.polygon.technology",
        8453: "https://mainnet.base.org",
        84532: "https://sepolia.base.org",
    }
    for chain_id, url in official.items():
        (endpoint,) = NETWORKS[chain_id].public_rpcs
        assert endpoint.url == url
        assert endpoint.operator and "rate-limited" in endpoint.limits
        assert "not production" in endpoint.limits


def test_a_provider_must_offer_overrides_tracing_and_fee_history() -> None:
    methods = dict(PROVIDER_REQUIREMENTS)
    assert set(methods) == {"eth_call with state overrides", "debug_traceCall", "eth_feeHistory"}
    assert "erc7562Tracer" in methods["debug_traceCall"]
    assert "callTracer and prestateTracer" in methods["debug_traceCall"]


def test_entryway_networks_lists_the_public_rpcs() -> None:
    import json

    from typer.testing import CliRunner

    from entryway.cli import app

    shown = CliRunner().invoke(app, ["networks"])
    assert shown.exit_code == 0, shown.output
    listed = {row["chainId"]: row for row in map(json.loads, shown.output.splitlines())}
    assert [r["url"] for r in listed[84532]["publicRpcs"]] == ["https://sepolia.base.org"]
    assert all(row["publicRpcs"] for row in listed.values())
