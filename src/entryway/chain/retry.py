"""When a call to a node is tried again, and where: one policy object for the node client.

Hosted RPC endpoints fail in ordinary ways (rate limits, a gateway's 502, a node that stops
answering for a while). Reads are safe to repeat, so they are retried with backoff and moved
to another endpoint; anything that may change state is not, because a repeated write can
land twice. Which calls count as reads is an allowlist, never a guess from the method name.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# Calls that read state and change nothing: asking twice can do no harm, only cost time.
IDEMPOTENT_METHODS: frozenset[str] = frozenset(
    {
        "eth_blockNumber",
        "eth_call",
        "eth_chainId",
        "eth_estimateGas",
        "eth_feeHistory",
        "eth_gasPrice",
        "eth_getBalance",
        "eth_getBlockByHash",
        "eth_getBlockByNumber",
        "eth_getBlockReceipts",
        "eth_getCode",
        "eth_getLogs",
        "eth_getProof",
        "eth_getStorageAt",
        "eth_getTransactionByHash",
        "eth_getTransactionCount",
        "eth_getTransactionReceipt",
        "eth_maxPriorityFeePerGas",
        "eth_syncing",
        "net_version",
        "web3_clientVersion",
        "debug_traceCall",
        "debug_traceTransaction",
    }
)

# 429: rate limited; 5xx: the endpoint (or a gateway in front of it) is failing right now.
RETRY_STATUSES: frozenset[int] = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How the node client retries a failed call and fails over between endpoints.

    Defaults: 3 tries of one endpoint, backoff from 0.1 s doubling up to 2 s with full
    jitter, HTTP 429/500/502/503/504 retried, a failed endpoint left alone for 30 s.

    Retried (reads in `idempotent_methods` only): connection errors, timeouts, and the HTTP
    statuses in `retry_statuses`. Never retried: JSON-RPC error objects (a revert, a bad
    parameter) under any HTTP status but 429, since the node did answer and would answer
    the same again. Any other answer that is not JSON-RPC (a 401, an HTML page) fails the
    endpoint at once: the next one may be configured right.

    - HTTP 429 is the exception for every call, writes included: the provider refused it
      before it ran, so it is tried again after `backoff(n)` or the `Retry-After` the
      provider named, whichever is longer, as long as that wait ends within the call's
      deadline (`chain.transport`).
    - A read gets up to `attempts` tries of an endpoint, sleeping `backoff(n)` between them;
      then that endpoint is marked failed and the next one takes over, without delay. A
      timeout ends an endpoint's turn at once: a node that let one call hang for the whole
      timeout would likely hang the next, and the caller has already waited that long.
    - A failed endpoint is passed over for `cooldown_s`, then tried again; while every
      endpoint is failed all of them are still tried, soonest-recovering first, so a
      client with one endpoint never refuses to call it.
    - When every endpoint has failed, the call raises `RpcTransportError`.

    Writes, and every method not in the allowlist, follow the client's rule for calls that
    must not be repeated: see `JsonRpcClient`.
    """

    attempts: int = 3  # tries of one endpoint, the first included
    backoff_base_s: float = 0.1
    backoff_cap_s: float = 2.0
    cooldown_s: float = 30.0
    retry_statuses: frozenset[int] = RETRY_STATUSES
    idempotent_methods: frozenset[str] = field(default=IDEMPOTENT_METHODS)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("a retry policy needs at least one attempt")
        if self.backoff_base_s < 0 or self.backoff_cap_s < 0 or self.cooldown_s < 0:
            raise ValueError("backoff and cool-down times cannot be negative")

    def is_idempotent(self, methods: tuple[str, ...]) -> bool:
        """A call (or a batch of calls) may be repeated only if every method in it may."""
        return all(m in self.idempotent_methods for m in methods)

    def backoff(self, retry: int, rng: random.Random | None = None) -> float:
        """Seconds to sleep before retry number `retry` (1 for the first retry).

        Full jitter: uniform between 0 and the capped exponential, so clients that failed
        together do not all come back at the same instant."""
        doublings = min(max(retry - 1, 0), 32)  # past 32 the cap has long taken over
        ceiling = min(self.backoff_cap_s, self.backoff_base_s * 2**doublings)
        return rng.uniform(0.0, ceiling) if rng is not None else random.uniform(0.0, ceiling)
