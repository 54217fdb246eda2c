"""The devnets' nodes quote fees as the networks they stand in for: Polygon's 25 gwei
minimum tip, Base's thousandth-of-a-gwei fees and its GasPriceOracle predeploy, whose L1
data fee a sponsored op pays and is charged credits for."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from entryway_sdk.models import UserOperationReceipt

from entryway import contracts
from entryway.bundler.port import receipt_of
from entryway.bundler.rpc_types import user_operation_json
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.devnet.devnet import Devnet
from entryway.devnet.fees import BASE_L1_PRICES
from entryway.domain.evm import hex_to_bytes
from entryway.domain.networks import GWEI, OP_STACK_GAS_PRICE_ORACLE
from entryway.domain.pricebook import default_price_book
from entryway.domain.userop import UserOperation
from entryway.paymaster.costs import sponsorship_quote
from entryway.storage.ledger_records import quote_breakdown
from tests.integration.bundler.conftest import RpcClient
from tests.integration.harness import ETHER, Harness

ORACLE = contracts.load("DevnetGasPriceOracle").abi
EP = contracts.load("EntryPoint").abi
POLYGON, BASE = 80002, 84532


@pytest.fixture(scope="module")
async def chains(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Devnet]:
    data_dir: Path = tmp_path_factory.mktemp("devnet-fees")
    async with Devnet(data_dir, [POLYGON, BASE]) as net:
        yield net


async def _rpc(devnet: Devnet, chain_id: int, method: str, *params: object) -> object:
    url = next(c.rpc_url for c in devnet.chains if c.chain_id == chain_id)
    async with JsonRpcClient(url) as rpc:
        return await rpc.request(method, list(params))


async def _fees(devnet: Devnet, chain_id: int) -> tuple[int, int, dict[str, object]]:
    tip = await _rpc(devnet, chain_id, "eth_maxPriorityFeePerGas")
    price = await _rpc(devnet, chain_id, "eth_gasPrice")
    history = await _rpc(devnet, chain_id, "eth_feeHistory", "0x4", "latest", [25, 50, 75])
    assert isinstance(tip, str) and isinstance(price, str) and isinstance(history, dict)
    return int(tip, 16), int(price, 16), history


async def test_polygon_stand_in_suggests_at_least_the_25_gwei_minimum_tip(chains: Devnet) -> None:
    tip, price, history = await _fees(chains, POLYGON)
    assert tip >= 25 * GWEI
    base_fees = [int(fee, 16) for fee in history["baseFeePerGas"]]  # type: ignore[attr-defined]
    assert all(fee >= 5 * GWEI for fee in base_fees)
    assert price >= base_fees[-1] + 25 * GWEI
    rewards = [int(r, 16) for block in history["reward"] for r in block]  # type: ignore[attr-defined]
    assert rewards and all(r >= 25 * GWEI for r in rewards)


async def test_base_stand_in_quotes_base_like_fees(chains: Devnet) -> None:
    tip, price, history = await _fees(chains, BASE)
    assert GWEI // 10_000 <= tip <= GWEI // 100  # ~0.001 gwei
    base_fees = [int(fee, 16) for fee in history["baseFeePerGas"]]  # type: ignore[attr-defined]
    assert all(GWEI // 1000 <= fee <= GWEI // 20 for fee in base_fees)  # ~0.005 gwei
    assert price < GWEI // 10


async def test_base_fee_stays_at_its_floor_as_blocks_are_mined(chains: Devnet) -> None:
    for _ in range(5):  # empty blocks: EIP-1559 alone would take 12.5% off each
        await _rpc(chains, POLYGON, "evm_mine")
    block = await _rpc(chains, POLYGON, "eth_getBlockByNumber", "latest", False)
    assert isinstance(block, dict)
    assert int(block["baseFeePerGas"], 16) == 5 * GWEI


async def test_base_stand_in_has_the_gas_price_oracle_predeploy(chains: Devnet) -> None:
    data = bytes(200) + b"\x01" * 800  # a small op's bundle: 1 kB, mostly non-zero
    call = {
        "to": OP_STACK_GAS_PRICE_ORACLE,
        "data": "0x" + ORACLE.encode_call("getL1Fee", data).hex(),
    }
    fee = int(str(await _rpc(chains, BASE, "eth_call", call, "latest")), 16)
    l1_gas = 200 * 4 + 800 * 16 + 68 * 16
    p = BASE_L1_PRICES
    expected = (
        l1_gas
        * (p.base_fee_scalar * 16 * p.l1_base_fee + p.blob_base_fee_scalar * p.blob_base_fee)
        // (16 * 10**6)
    )
    assert fee == expected
    assert 10**9 < fee < 10**12  # a hundredth of a cent's worth of ETH, give or take
    polygon_code = await _rpc(chains, POLYGON, "eth_getCode", OP_STACK_GAS_PRICE_ORACLE, "latest")
    assert polygon_code == "0x"  # an OP-stack predeploy only where the chain is OP-stack


async def _sponsored_op(
    devnet: Devnet, chain_id: int, caplog: pytest.LogCaptureFixture
) -> tuple[dict[str, Any], int | None, dict[str, Any]]:
    """Send one sponsored op with a default client's fees; its receipt as the bundler serves
    it, the L1 fee the bundler quoted for it (None off OP-stack chains) and its status."""
    chain = next(c for c in devnet.chains if c.chain_id == chain_id)
    async with JsonRpcClient(chain.rpc_url) as rpc:
        eth = EthClient(rpc)
        executor = Harness.new_key()
        await rpc.request("anvil_setBalance", [executor.address, hex(10 * ETHER)])
        harness = Harness(
            eth=eth,
            chain_id=chain_id,
            deployment=chain.deployment,
            paymaster_signer=devnet.keys.paymaster_signer,
            operator=devnet.keys.operator,
            executor=Transactor(eth, executor, chain_id),
        )
        with caplog.at_level(logging.WARNING):
            bundler_rpc = await build_bundler(
                eth,
                StandaloneSettings(
                    rpc_url=chain.rpc_url,
                    entry_point=chain.deployment.entry_point,
                    executor_keys=(executor,),
                    debug_rpc=True,
                    mode=BundlingMode.MANUAL,
                ),
            )
        assert "L1 fees not charged" not in caplog.text
        quoter = bundler_rpc.bundler.l1_fees
        await bundler_rpc.bundler.start()
        try:
            client = RpcClient(bundler_rpc, chain.deployment.entry_point)
            tip = await eth.max_priority_fee()  # as a default viem client takes it
            base_fee = int((await eth.get_block("latest"))["baseFeePerGas"], 16)
            owner = harness.new_key()
            op = replace(
                await harness.build_op(owner.address, b""),
                max_fee_per_gas=2 * base_fee + tip,
                max_priority_fee_per_gas=tip,
            )
            draft = harness.sign(harness.sponsor(op), owner)
            estimate = await client.result(
                "eth_estimateUserOperationGas", user_operation_json(draft), client.entry_point
            )
            pvg = int(estimate["preVerificationGas"], 16)
            paid = harness.sign(harness.sponsor(replace(draft, pre_verification_gas=pvg)), owner)
            l1_fee = None if quoter is None else await quoter.fee_wei(paid)
            if quoter is not None:
                assert pvg > await quoter.gas(paid) > 0
            op_hash = await client.send(paid)
            await client.bundle()
            receipt = await client.result("eth_getUserOperationReceipt", op_hash)
            status = await client.result("entryway_getUserOperationStatus", op_hash)
        finally:
            await bundler_rpc.bundler.stop()
    assert receipt["success"]
    return receipt, l1_fee, status


async def test_sponsored_op_on_base_pays_the_l1_data_fee_in_credits(
    chains: Devnet, caplog: pytest.LogCaptureFixture
) -> None:
    receipt, l1_fee, _ = await _sponsored_op(chains, BASE, caplog)
    assert l1_fee is not None
    cost = int(receipt["actualGasCost"], 16)
    assert cost > l1_fee > 0
    prices = default_price_book()
    credits = prices.gas_credits(BASE, cost)
    assert credits > prices.gas_credits(BASE, cost - l1_fee)
    assert credits < 50_000  # Base-like fees: not the 800,000 credits of a 1 gwei tip


async def test_base_receipt_shows_the_oracles_l1_fee_and_the_settlement_names_it(
    chains: Devnet, caplog: pytest.LogCaptureFixture
) -> None:
    receipt, quoted, status = await _sponsored_op(chains, BASE, caplog)
    tx = receipt["receipt"]
    assert "l1Fee" not in tx  # anvil, unlike an OP-stack node: Entryway asks the oracle
    bundle = await _rpc(chains, BASE, "eth_getTransactionByHash", tx["transactionHash"])
    assert isinstance(bundle, dict)
    call = {
        "to": OP_STACK_GAS_PRICE_ORACLE,
        "data": "0x" + ORACLE.encode_call("getL1Fee", hex_to_bytes(bundle["input"])).hex(),
    }
    oracle_fee = int(str(await _rpc(chains, BASE, "eth_call", call, tx["blockNumber"])), 16)
    shown = int(receipt["l1Fee"], 16)
    assert shown == oracle_fee > 0  # the op was alone in its bundle: all of its L1 fee
    assert quoted is not None and abs(shown - quoted) * 20 < quoted  # what its PVG paid for
    assert status["status"] == "included" and status["l1Fee"] == receipt["l1Fee"]

    parsed = receipt_of(receipt)
    assert parsed.l1_fee == shown
    assert UserOperationReceipt.parse(receipt).l1_fee == shown
    op = UserOperation.from_packed(
        next(iter(EP.decode_call("handleOps", hex_to_bytes(bundle["input"]))[0]))
    )
    prices = default_price_book()
    settled = sponsorship_quote(prices, BASE, op, parsed.actual_gas_cost, parsed.l1_fee)
    unshown = sponsorship_quote(prices, BASE, op, parsed.actual_gas_cost)
    assert settled.credits == unshown.credits  # shown, not charged twice
    breakdown = json.loads(quote_breakdown(settled) or "{}")
    assert breakdown["included"] == {
        "l1_fee_wei": shown,
        "l1_fee_credits": prices.gas_credits(BASE, shown),
    }
    assert sum(v for k, v in breakdown.items() if k != "included") == settled.credits


async def test_polygon_receipt_has_no_l1_fee(
    chains: Devnet, caplog: pytest.LogCaptureFixture
) -> None:
    receipt, quoted, status = await _sponsored_op(chains, POLYGON, caplog)
    assert quoted is None
    assert "l1Fee" not in receipt and "l1Fee" not in status
    assert receipt_of(receipt).l1_fee is None
    assert UserOperationReceipt.parse(receipt).l1_fee is None


def test_the_stand_in_answers_the_selector_entryway_quotes_with() -> None:
    assert ORACLE.encode_call("getL1Fee", b"")[:4] == bytes.fromhex("49948e0e")
