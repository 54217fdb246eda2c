"""What the devnets' fee layer answers in place of anvil, per network."""

from __future__ import annotations

from entryway.devnet.fees import DevnetFees, devnet_fees
from entryway.domain.networks import GWEI


def test_polygon_suggests_its_minimum_tip_on_an_idle_chain_and_more_when_full() -> None:
    fees = devnet_fees(80002)
    assert fees is not None and fees.l1_oracle is None
    assert fees.tip(node_tip=0, latest_gas_used_ratio=0.01) == 25 * GWEI
    assert fees.tip(node_tip=1 * GWEI, latest_gas_used_ratio=0.99) == 25 * GWEI
    assert fees.tip(node_tip=40 * GWEI, latest_gas_used_ratio=0.99) == 40 * GWEI


def test_base_suggests_a_thousandth_of_a_gwei_whatever_anvil_saw() -> None:
    fees = devnet_fees(84532)
    assert fees is not None and fees.l1_oracle is not None and fees.l1_prices is not None
    assert fees.tip(node_tip=GWEI, latest_gas_used_ratio=0.002) == GWEI // 1000
    assert fees.gas_price(next_base_fee=1, tip=GWEI // 1000) == fees.base_fee_floor + GWEI // 1000


def test_fee_history_shows_the_floor_and_the_minimum_tip() -> None:
    fees = devnet_fees(137)
    assert fees is not None
    shown = fees.fee_history(
        {"baseFeePerGas": ["0x1", hex(90 * GWEI)], "reward": [["0x0", hex(30 * GWEI)]]}
    )
    assert shown["baseFeePerGas"] == [hex(fees.base_fee_floor), hex(90 * GWEI)]
    assert shown["reward"] == [[hex(25 * GWEI), hex(30 * GWEI)]]


def test_a_chain_no_network_has_runs_plain_anvil() -> None:
    assert devnet_fees(31337) is None


def test_a_fee_less_transaction_is_filled_as_geth_fills_it() -> None:
    fees = DevnetFees(base_fee_floor=GWEI // 200, min_tip=GWEI // 1000)
    filled = fees.filled({"to": "0x01"}, next_base_fee=GWEI // 400, tip=GWEI // 1000)
    assert filled["maxPriorityFeePerGas"] == hex(GWEI // 1000)
    assert filled["maxFeePerGas"] == hex(2 * (GWEI // 200) + GWEI // 1000)  # from the floor
    legacy = fees.filled({"type": "0x0"}, next_base_fee=GWEI // 200, tip=GWEI // 1000)
    assert legacy["gasPrice"] == hex(GWEI // 200 + GWEI // 1000)
    given = {"maxFeePerGas": hex(GWEI), "maxPriorityFeePerGas": hex(GWEI)}
    assert fees.filled(given, next_base_fee=GWEI, tip=1) == given
