"""What bench/sponsor.py records about each op (`OpTrace`) and each workload (`Phase`), and
the tables it writes into docs/benchmarks.md."""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

PREPARE_SEND = (
    "pm_getPaymasterStubData",
    "eth_estimateUserOperationGas",
    "pm_getPaymasterData",
    "eth_sendUserOperation",
)


@dataclass
class OpTrace:
    """One op as the client saw it: each service call (method, start, end), the receipt's
    arrival, the credits /op-status reported, and how it ended."""

    calls: list[tuple[str, float, float]] = field(default_factory=list)
    send_s: float | None = None  # the whole wallet.send
    user_op_hash: str | None = None
    receipt_at: float | None = None
    held: int | None = None
    settled: int | None = None
    success: bool | None = None
    tx_hash: str | None = None
    error: str | None = None

    def first(self, method: str) -> tuple[float, float] | None:
        return next(((t0, t1) for m, t0, t1 in self.calls if m == method), None)

    def latency(self, method: str) -> float | None:
        span = self.first(method)
        return None if span is None else span[1] - span[0]

    def prepare_send(self) -> float | None:
        stub, send = self.first(PREPARE_SEND[0]), self.first(PREPARE_SEND[-1])
        return None if stub is None or send is None else send[1] - stub[0]

    def send_to_receipt(self) -> float | None:
        send = self.first("eth_sendUserOperation")
        return None if send is None or self.receipt_at is None else self.receipt_at - send[0]


def _send_answered(trace: OpTrace) -> float | None:
    span = trace.first("eth_sendUserOperation")
    return None if span is None else span[1]


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest rank, as bench/bundler.py; NaN when nothing was measured (every op failed)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _values(traces: Sequence[OpTrace], get: Callable[[OpTrace], float | None]) -> list[float]:
    return [v for v in map(get, traces) if v is not None]


@dataclass
class Phase:
    name: str
    traces: list[OpTrace]
    started: float
    cpu: dict[str, float]  # seconds during the phase, by process
    balance_drop: int | None = None

    @property
    def included(self) -> list[OpTrace]:
        return [t for t in self.traces if t.success]

    def rates(self) -> tuple[float, float]:
        sent = _values(self.traces, _send_answered)
        mined = _values(self.included, lambda t: t.receipt_at)

        def rate(times: list[float]) -> float:
            return len(times) / (max(times) - self.started) if times else 0.0

        return rate(sent), rate(mined)

    def summary(self) -> dict[str, Any]:
        sent_rate, included_rate = self.rates()
        prepare = _values(self.traces, OpTrace.prepare_send)
        whole = _values(self.traces, lambda t: t.send_s)
        receipt = _values(self.included, OpTrace.send_to_receipt)
        bundles = Counter(t.tx_hash for t in self.included)
        return {
            "ops": len(self.traces),
            "included": len(self.included),
            "errors": [t.error for t in self.traces if t.error],
            "sent_per_s": sent_rate,
            "included_per_s": included_rate,
            "prepare_send_p50": _median(prepare),
            "prepare_send_p99": percentile(prepare, 99),
            "wallet_send_p50": _median(whole),
            "wallet_send_p99": percentile(whole, 99),
            "receipt_p50": _median(receipt),
            "receipt_p95": percentile(receipt, 95),
            "ops_per_bundle": len(self.included) / max(1, len(bundles)),
            "calls_per_op": statistics.mean(len(t.calls) for t in self.traces),
            "calls": {
                m: (
                    _median(v := _values(self.traces, lambda t, m=m: t.latency(m))),
                    percentile(v, 99),
                )
                for m in ("entryway_getUserOperationGasPrice", *PREPARE_SEND)
            },
        }


def credits_row(label: str, traces: Sequence[OpTrace]) -> str:
    held = [t.held for t in traces if t.held is not None]
    settled = [t.settled for t in traces if t.settled is not None]
    if not held or not settled:
        return f"| {label} | not observed | | |"
    mean_held, mean_settled = statistics.mean(held), statistics.mean(settled)
    return (
        f"| {label} | {mean_held:,.0f} ({min(held):,}-{max(held):,}; {len(held)} ops) | "
        f"{mean_settled:,.0f} ({min(settled):,}-{max(settled):,}; {len(settled)} ops) | "
        f"{mean_settled / mean_held:.0%} |"
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


def report(
    args: argparse.Namespace, warm: list[OpTrace], phases: list[Phase], context: dict[str, Any]
) -> list[str]:
    s = [p.summary() for p in phases]
    labels = [f"lockstep: {args.accounts} accounts x {args.ops} sequential ops"]
    if len(phases) > 1:
        labels.append(f"burst: {args.burst} accounts x 1 op, {args.concurrency} workers")
    load = " → ".join(
        f"{a[0]:.2f} / {a[1]:.2f}" for a in (context["load_before"], context["load_after"])
    )
    lines = [
        f"{context['date']}; load average (1 / 5 min) before → after the run: {load}; "
        f"receipts polled every {args.poll} s.",
        "",
        "| figure | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(labels),
    ]

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> None:
        lines.append(f"| {label} | " + " | ".join(cell(x) for x in s) + " |")

    row("sponsored ops/s accepted (sent)", lambda x: f"{x['sent_per_s']:.1f}")
    row("included ops/s", lambda x: f"{x['included_per_s']:.1f}")
    row(
        "prepare+send p50 / p99 (stub → send answered)",
        lambda x: f"{_ms(x['prepare_send_p50'])} / {_ms(x['prepare_send_p99'])}",
    )
    row(
        "whole `wallet.send` p50 / p99 (+ gas price, nonce and code reads)",
        lambda x: f"{_ms(x['wallet_send_p50'])} / {_ms(x['wallet_send_p99'])}",
    )
    row(
        "send-to-receipt p50 / p95",
        lambda x: f"{x['receipt_p50']:.2f} s / {x['receipt_p95']:.2f} s",
    )
    row(
        "every op included",
        lambda x: f"{'yes' if x['included'] == x['ops'] else 'no'}, {x['included']}/{x['ops']}",
    )
    row("client-side errors", lambda x: _errors(x["errors"]))
    row("ops per bundle (mean)", lambda x: f"{x['ops_per_bundle']:.1f}")
    row(
        "JSON-RPC requests to the service per op (with `op.wait()`'s polls)",
        lambda x: f"{x['calls_per_op']:.1f}",
    )
    lines += [
        "",
        "| call, p50 / p99 | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(labels),
    ]
    for method in s[0]["calls"]:
        row(f"`{method}`", lambda x, m=method: f"{_ms(x['calls'][m][0])} / {_ms(x['calls'][m][1])}")

    lines += [
        "",
        "| credits per op | held (at `pm_getPaymasterData`) | settled (from the receipt) | "
        "settled / held |",
        "|---|---|---|---|",
        credits_row("first op, deploys the account (warm-up)", warm),
        *(credits_row(f"`execute`, one call ({p.name})", p.traces) for p in phases),
    ]
    for p in phases:
        settled = sum(t.settled or 0 for t in p.traces)
        gap = (p.balance_drop or 0) - settled
        lines.append(
            f"| {p.name}: balance drop / sum of settled credits | {p.balance_drop:,} | "
            f"{settled:,} | {'equal' if gap == 0 else f'{gap:+,} still held'} |"
        )

    lines += [
        "",
        "| CPU during the phase (s; share of the 2 cores) | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(labels),
    ]
    for who, label in (
        ("service", "`entryway up` (API, bundler, paymaster, settler)"),
        ("anvil", "anvil (both devnets)"),
        ("client", "this client (SDK, httpx, signing)"),
    ):
        lines.append(f"| {label} | " + " | ".join(_cpu_cell(p, who) for p in phases) + " |")
    lines.append(
        "| everything else on the machine | "
        + " | ".join(_cpu_cell(p, "others") for p in phases)
        + " |"
    )
    return lines


def _errors(errors: list[str]) -> str:
    if not errors:
        return "none"
    kinds = Counter(e[:120] for e in errors)
    return "; ".join(f"{n} x {kind.replace('|', '/')}" for kind, n in kinds.most_common(3))


def _cpu_cell(phase: Phase, who: str) -> str:
    cpu = phase.cpu
    seconds = (  # the two clocks differ by a few ticks: an idle rest shows as 0
        max(0.0, cpu["machine_busy"] - cpu["service"] - cpu["anvil"] - cpu["client"])
        if who == "others"
        else cpu[who]
    )
    share = seconds / cpu["machine_total"] if cpu["machine_total"] else 0.0
    per_op = 1000 * seconds / max(1, len(phase.traces))
    return f"{seconds:.1f} s ({share:.0%}; {per_op:.0f} ms/op)"
