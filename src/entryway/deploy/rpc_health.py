"""Whether a network is "active, with stable RPC endpoints" (requirements §1.2, item 2):
how fresh the endpoint's head is against the chain's block time, and how it answers over a
short window of probes. Measured by `entryway deploy` before it deploys.

The verdicts are pure (`head_freshness`, `stability`); `measure_rpc_health` does the probing.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from entryway.chain.rpc import EthClient, RpcError, RpcTransportError
from entryway.domain.networks import NETWORKS

# A chain the registry does not list, whose recent blocks give no pace: Ethereum's slot.
FALLBACK_BLOCK_TIME_S = 12.0
# How far back the block time is measured from, for a chain the registry does not list.
_PACE_SPAN_BLOCKS = 100


@dataclass(frozen=True, slots=True)
class RpcHealthThresholds:
    """What `entryway deploy` accepts as an active network with a stable endpoint; each is a
    command option (docs/deploy.md)."""

    probes: int = 5  # eth_blockNumber calls over the window
    probe_interval_s: float = 0.5  # between two probes: a 2 s window by default
    max_failures: int = 0  # probes that may go unanswered (an error or no answer in time)
    max_latency_ms: int = 2_000  # the slowest answer allowed
    max_head_age_blocks: int = 30  # the head may be this many block times old, no more
    probe_timeout_s: float = 5.0  # one probe's answer, at most

    def __post_init__(self) -> None:
        if self.probes < 1 or self.max_failures < 0 or self.max_head_age_blocks < 1:
            raise ValueError("need at least one probe and one block time of head age")
        if self.probe_interval_s < 0 or self.max_latency_ms < 1 or self.probe_timeout_s <= 0:
            raise ValueError("probe interval, latency and timeout must be positive")


@dataclass(frozen=True, slots=True)
class Probe:
    latency_ms: int  # to the answer, or to the failure
    block_number: int | None  # None: no answer
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    detail: str


def head_freshness(
    head_number: int, head_age_s: float, block_time_s: float, thresholds: RpcHealthThresholds
) -> Verdict:
    """Fresh while the latest block is no older than `max_head_age_blocks` block times: a
    halted chain, or an endpoint stuck behind it, shows an ever older head."""
    limit_s = thresholds.max_head_age_blocks * block_time_s
    age = max(head_age_s, 0.0)  # a node's clock a little ahead of ours
    return Verdict(
        age <= limit_s,
        f"latest block {head_number} is {age:.0f} s old; block time {block_time_s:g} s, "
        f"stale after {limit_s:g} s ({thresholds.max_head_age_blocks} blocks)",
    )


def stability(probes: Sequence[Probe], thresholds: RpcHealthThresholds) -> Verdict:
    """Stable when no more probes failed than allowed and every answer came within the
    latency limit."""
    answered = [p for p in probes if p.block_number is not None]
    failures = len(probes) - len(answered)
    latencies = [p.latency_ms for p in answered]
    slowest = max(latencies, default=0)
    ok = bool(answered) and failures <= thresholds.max_failures
    ok = ok and slowest <= thresholds.max_latency_ms
    parts = [
        f"{len(answered)}/{len(probes)} probes answered "
        f"over {(len(probes) - 1) * thresholds.probe_interval_s:g} s",
        f"failures {failures} (limit {thresholds.max_failures})",
    ]
    if latencies:
        parts.append(
            f"latency median {statistics.median(latencies):.0f} ms, max {slowest} ms "
            f"(limit {thresholds.max_latency_ms} ms)"
        )
    heads = [p.block_number for p in answered if p.block_number is not None]
    if heads:
        parts.append(f"head {min(heads)} to {max(heads)}")
    errors = sorted({p.error for p in probes if p.error})
    if errors:
        parts.append("errors: " + "; ".join(errors[:3]))
    return Verdict(ok, "; ".join(parts))


async def probe_stability(
    eth: EthClient,
    thresholds: RpcHealthThresholds,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> list[Probe]:
    """`thresholds.probes` eth_blockNumber calls, `probe_interval_s` apart. `eth` should not
    retry: a retried call would hide the failure the probe is there to count."""
    probes: list[Probe] = []
    for n in range(thresholds.probes):
        if n:
            await asyncio.sleep(thresholds.probe_interval_s)
        start = clock()
        try:
            number = await asyncio.wait_for(eth.block_number(), thresholds.probe_timeout_s)
        except (RpcTransportError, RpcError, TimeoutError) as exc:
            error = str(exc) or type(exc).__name__
            probes.append(Probe(_ms(clock() - start), None, error))
            continue
        probes.append(Probe(_ms(clock() - start), number))
    return probes


async def block_time_s(eth: EthClient, chain_id: int, head: dict[str, object]) -> float:
    """The chain's block time: the registry's for a network it lists, else the pace of the
    last blocks, else `FALLBACK_BLOCK_TIME_S`."""
    known = NETWORKS.get(chain_id)
    if known is not None:
        return known.block_time_ms / 1000
    number = int(str(head["number"]), 16)
    span = min(number, _PACE_SPAN_BLOCKS)
    if span == 0:
        return FALLBACK_BLOCK_TIME_S
    earlier = await eth.get_block(hex(number - span))
    elapsed = int(str(head["timestamp"]), 16) - int(str(earlier["timestamp"]), 16)
    return elapsed / span if elapsed > 0 else FALLBACK_BLOCK_TIME_S


def _ms(seconds: float) -> int:
    return round(seconds * 1000)
