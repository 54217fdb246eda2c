"""The pure part of the chain-cost bench: euros of a chain cost, the devnet-to-real-chain
factor and its 2x tolerance, and the tables written into docs/pricing.md."""

from __future__ import annotations

from fractions import Fraction

import pytest

from bench.chain_cost_report import (
    GWEI,
    TYPICAL_FEES,
    MeasuredCost,
    comparison_table,
    cost_table,
    eur_text,
    fee_factor,
    gwei_text,
    micro_eur,
    within_tolerance,
    write_block,
)

POL, ETH = 200_000, 3_000_000_000  # micro-euros per token


def cost(chain_id: int, price_wei: int, **over: object) -> MeasuredCost:
    fields: dict[str, object] = {
        "chain_id": chain_id,
        "operation": "sponsored op",
        "gas_used": 100_000,
        "base_fee_wei": price_wei // 6,
        "gas_price_wei": price_wei,
        "l1_fee_wei": None,
        "gas_cost_wei": 100_000 * price_wei,
        "credits": 1_000,
    }
    fields.update(over)
    return MeasuredCost(**fields)  # type: ignore[arg-type]


def test_micro_eur_converts_at_the_token_price() -> None:
    # the price book's own example: 100,000 gas at 30 gwei is 0.003 POL, 600 micro-euros
    assert micro_eur(100_000 * 30 * GWEI, POL) == 600
    # 95,000 gas at 0.006 gwei on Base: 5.7e-7 ETH at 3,000 EUR is 1,710 micro-euros
    assert micro_eur(95_000 * 6 * GWEI // 1000, ETH) == 1_710
    assert micro_eur(0, ETH) == 0


def test_factor_within_two_either_way() -> None:
    typical = 30 * GWEI
    assert within_tolerance(fee_factor(30 * GWEI, typical))
    assert within_tolerance(fee_factor(60 * GWEI, typical))
    assert within_tolerance(fee_factor(15 * GWEI, typical))
    assert not within_tolerance(fee_factor(61 * GWEI, typical))
    assert not within_tolerance(fee_factor(14 * GWEI, typical))
    # the Base stand-in before its fees were fixed: a 1 gwei tip against 0.006 gwei
    assert fee_factor(GWEI, 6 * GWEI // 1000) == Fraction(500, 3)


@pytest.mark.parametrize(
    ("wei", "text"),
    [(0, "0"), (25 * GWEI, "25"), (5 * GWEI // 1000, "0.005"), (1_002_477_372, "1.002")],
)
def test_gwei_text(wei: int, text: str) -> None:
    assert gwei_text(wei) == text


def test_eur_text() -> None:
    assert eur_text(1_725) == "0.001725"
    assert eur_text(3_000_000_000) == "3,000.00"


def test_cost_table_shows_chain_cost_and_credits_in_euros() -> None:
    row = cost(8453, 6 * GWEI // 1000, l1_fee_wei=17_600_000_000, credits=2_258)
    line = cost_table([row], {8453: ETH})[2]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[:5] == ["8453", "sponsored op", "100,000", "0.001", "0.005"]
    assert cells[5] == "0.0000000176 ETH"  # the L1 fee
    assert cells[7] == "0.001800"  # 6e-7 ETH at 3,000 EUR
    assert cells[8:] == ["2,258", "0.002258"]


def test_cost_table_reports_a_failed_operation() -> None:
    row = cost(137, 0, error="TimeoutError: no receipt")
    assert "failed: TimeoutError: no receipt" in cost_table([row], {137: POL})[2]


def test_comparison_flags_a_chain_outside_the_tolerance() -> None:
    rows = [cost(137, 30 * GWEI), cost(84532, GWEI + 2 * GWEI // 1000)]
    table = comparison_table(rows)
    polygon, base = table[2], table[3]
    assert polygon.startswith("| 137 | 30 | 30 | 1.00x | yes |")
    assert base.startswith("| 84532 | 1.002 | 0.006 | 167.00x | **no** |")


def test_every_chain_has_a_sourced_typical_fee() -> None:
    assert set(TYPICAL_FEES) == {137, 80002, 8453, 84532}
    assert all(t.source and t.gas_price_wei > 0 for t in TYPICAL_FEES.values())


def test_write_block_replaces_only_between_the_markers() -> None:
    doc = "intro\n<!-- chain-costs:begin -->\nold\n<!-- chain-costs:end -->\nafter\n"
    out = write_block(doc, "chain-costs", ["new", "table"])
    assert out == "intro\n<!-- chain-costs:begin -->\nnew\ntable\n<!-- chain-costs:end -->\nafter\n"
    with pytest.raises(ValueError, match="no <!-- other:begin -->"):
        write_block(doc, "other", ["x"])
