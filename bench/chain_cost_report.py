"""The figures bench/chain_costs.py measures, and the tables it writes into docs/pricing.md.
Pure: what one operation cost on a devnet, its euros at the configured token price, and how
its fees compare with the real chain's typical fees."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

GWEI = 10**9
WEI_PER_TOKEN = 10**18
MICRO_EUR_PER_EUR = 10**6
TOLERANCE = 2  # devnet fees must sit within this factor of the real chain's typical fees
DOC = Path(__file__).resolve().parents[1] / "docs" / "pricing.md"
SYMBOLS = {137: "POL", 80002: "POL", 8453: "ETH", 84532: "ETH"}


@dataclass(frozen=True, slots=True)
class TypicalFee:
    """What a transaction on the real chain typically pays per gas, and where that is said."""

    chain_id: int
    gas_price_wei: int  # base fee + priority fee, per gas
    basis: str
    source: str


# Polygon PoS: validators refuse tips under 25 gwei and the base fee sits near zero when
# blocks are not full, so a transaction pays about 25-35 gwei (the gas station's example
# answer: standard 32 gwei, base fee 1.6e-8 gwei). Base: the L2 base fee sits at or near its
# 0.005 gwei floor in normal operation, tips are a small fraction of it.
TYPICAL_FEES: dict[int, TypicalFee] = {
    t.chain_id: t
    for t in (
        TypicalFee(
            137,
            30 * GWEI,
            "25 gwei minimum tip + a base fee near zero; gas station 'standard' about 30-32 gwei",
            "Polygon docs, Polygon gas station (docs.polygon.technology/tools/gas/"
            "polygon-gas-station), read 2026-11-24",
        ),
        TypicalFee(
            80002,
            30 * GWEI,
            "Amoy enforces the same 25 gwei minimum tip as mainnet (gas station /amoy)",
            "Polygon docs, Polygon gas station (docs.polygon.technology/tools/gas/"
            "polygon-gas-station), read 2026-11-24",
        ),
        TypicalFee(
            8453,
            6 * GWEI // 1000,
            "0.005 gwei minimum base fee (Jovian), where it sits in normal operation, "
            "+ a tip of about 0.001 gwei",
            "Base docs, Network Fees (docs.base.org/base-chain/network-information/"
            "network-fees), read 2026-11-24",
        ),
        TypicalFee(
            84532,
            6 * GWEI // 1000,
            "Base Sepolia has the same 0.005 gwei minimum base fee as mainnet",
            "Base docs, Network Fees (docs.base.org/base-chain/network-information/"
            "network-fees), read 2026-11-24",
        ),
    )
}


@dataclass(frozen=True, slots=True)
class MeasuredCost:
    """One operation as it landed on a devnet. `gas_cost_wei` is what the chain took for it
    (for an op, the EntryPoint's actualGasCost, which carries the L1 fee through
    preVerificationGas; for an anchor, gas used x price paid + L1 fee); `credits` what the
    project was charged (None when the service did not say)."""

    chain_id: int
    operation: str
    gas_used: int
    base_fee_wei: int
    gas_price_wei: int  # effective price per gas of the transaction
    l1_fee_wei: int | None  # OP-stack chains; None where there is no L1 fee
    gas_cost_wei: int
    credits: int | None
    error: str | None = None

    @property
    def tip_wei(self) -> int:
        return max(self.gas_price_wei - self.base_fee_wei, 0)


def micro_eur(wei: int, token_micro_eur: int) -> int:
    """What `wei` of a native token is worth, in micro-euros, rounded to the nearest."""
    return (wei * token_micro_eur + WEI_PER_TOKEN // 2) // WEI_PER_TOKEN


def fee_factor(measured_wei: int, typical_wei: int) -> Fraction:
    """Devnet price per gas over the typical one (1 = the same)."""
    return Fraction(measured_wei, max(typical_wei, 1))


def within_tolerance(factor: Fraction) -> bool:
    return Fraction(1, TOLERANCE) <= factor <= TOLERANCE


def gwei_text(wei: int) -> str:
    """A price per gas in gwei, to four significant digits without float arithmetic."""
    if wei == 0:
        return "0"
    value = Fraction(wei, GWEI)
    digits = 0
    while value * 10**digits < 1000 and digits < 9:
        digits += 1
    scaled = round(value * 10**digits)
    whole, part = divmod(scaled, 10**digits)
    return f"{whole}.{part:0{digits}d}".rstrip("0").rstrip(".") if digits else f"{whole:,}"


def eur_text(micro: int) -> str:
    """Micro-euros as euros: cents for a euro or more, else six decimals."""
    euros, rest = divmod(micro, MICRO_EUR_PER_EUR)
    if euros:
        return f"{euros:,}.{rest // 10**4:02d}"
    return f"0.{rest:06d}"


def price_text(micro: int) -> str:
    """A token price in euros and cents (rounded down)."""
    euros, rest = divmod(micro, MICRO_EUR_PER_EUR)
    return f"{euros:,}.{rest // 10**4:02d}"


def token_text(wei: int, chain_id: int) -> str:
    whole, rest = divmod(wei, WEI_PER_TOKEN)
    digits = f"{whole}.{rest:018d}"[:12].rstrip("0").rstrip(".")
    return f"{digits} {SYMBOLS.get(chain_id, '')}".strip()


def factor_text(factor: Fraction) -> str:
    return f"{float(factor):.2f}x"


def cost_table(rows: Sequence[MeasuredCost], token_prices: Mapping[int, int]) -> list[str]:
    """The measured table: one line per chain and operation."""
    lines = [
        "| chain | operation | gas used | base fee (gwei) | tip (gwei) | L1 fee | chain cost "
        "| chain cost (EUR) | credits | credits (EUR) |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        if r.error is not None:
            lines.append(f"| {r.chain_id} | {r.operation} | failed: {r.error} |||||||| ")
            continue
        price = token_prices[r.chain_id]
        l1 = "-" if r.l1_fee_wei is None else token_text(r.l1_fee_wei, r.chain_id)
        credits = "-" if r.credits is None else f"{r.credits:,}"
        charged = "-" if r.credits is None else eur_text(r.credits)  # 1 credit = 1 micro-euro
        lines.append(
            f"| {r.chain_id} | {r.operation} | {r.gas_used:,} | {gwei_text(r.base_fee_wei)} "
            f"| {gwei_text(r.tip_wei)} | {l1} | {token_text(r.gas_cost_wei, r.chain_id)} "
            f"| {eur_text(micro_eur(r.gas_cost_wei, price))} | {credits} | {charged} |"
        )
    return lines


def comparison_table(rows: Sequence[MeasuredCost]) -> list[str]:
    """Per chain, the price per gas the devnet's transactions paid (their median) against
    the real chain's typical price, and whether it sits within the tolerance."""
    lines = [
        "| chain | devnet price paid (gwei) | typical (gwei) | factor | within 2x "
        "| typical: basis |",
        "|---|--:|--:|--:|---|---|",
    ]
    for chain_id in sorted({r.chain_id for r in rows}, key=list(TYPICAL_FEES).index):
        prices = sorted(r.gas_price_wei for r in rows if r.chain_id == chain_id and not r.error)
        typical = TYPICAL_FEES[chain_id]
        if not prices:
            lines.append(f"| {chain_id} | - | {gwei_text(typical.gas_price_wei)} | - | no |")
            continue
        paid = prices[len(prices) // 2]
        factor = fee_factor(paid, typical.gas_price_wei)
        verdict = "yes" if within_tolerance(factor) else "**no**"
        lines.append(
            f"| {chain_id} | {gwei_text(paid)} | {gwei_text(typical.gas_price_wei)} "
            f"| {factor_text(factor)} | {verdict} | {typical.basis} |"
        )
    return lines


def sources() -> list[str]:
    seen: list[str] = []
    for t in TYPICAL_FEES.values():
        if t.source not in seen:
            seen.append(t.source)
    return [f"- {s}" for s in seen]


def write_block(text: str, name: str, lines: Sequence[str]) -> str:
    """`text` with the block between `<!-- name:begin -->` and `<!-- name:end -->` replaced
    by `lines` (the markers must be there)."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if begin not in text or end not in text:
        raise ValueError(f"no {begin} … {end} block in the document")
    head, rest = text.split(begin, 1)
    return head + "\n".join([begin, *lines, end]) + rest.split(end, 1)[1]
