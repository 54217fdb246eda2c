"""What each kind of node refuses, and how it says so. Pure: the relay applies these rules.

The errors copy the shapes hosted providers and public endpoints answer with (codes and
wording), since the node client recognises a refusal by them: a rule written here with a
friendlier message than a real provider's would let a client pass that fails in production.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INVALID_REQUEST = -32600
LIMIT_EXCEEDED = -32005
SERVER_ERROR = -32000

HOSTED_TRACERS = frozenset({"callTracer", "prestateTracer", "4byteTracer"})
TRACES = frozenset(
    {
        "debug_traceCall",
        "debug_traceTransaction",
        "debug_traceBlockByNumber",
        "debug_traceBlockByHash",
    }
)
DEV_NAMESPACES = ("anvil_", "evm_", "hardhat_")
ERC7562_TRACER = "erc7562Tracer"


class NodeKind(enum.StrEnum):
    """`hosted`: a large provider's debug API (named tracers only) and its caps; `public`: a
    network's free endpoint, the same caps and no debug namespace; `geth`: a full node with
    the native ERC-7562 tracer; `anvil`: anvil itself, untouched."""

    HOSTED = "hosted"
    PUBLIC = "public"
    GETH = "geth"
    ANVIL = "anvil"

    @property
    def capped(self) -> bool:
        """Whether the provider caps log ranges, batches and bursts."""
        return self in (NodeKind.HOSTED, NodeKind.PUBLIC)


@dataclass
class RelayLimits:
    """A capped kind's limits; a test changes them on the running relay (`NodeRelay.limits`).

    The burst limiter is a token bucket of `burst` requests refilled at `per_s` a second;
    an HTTP request (a batch is one) takes a token, and with none left is answered 429 with
    `Retry-After: retry_after_s`. `throttle_next` requests are answered 429 whatever the
    bucket holds (a test that needs exactly one refusal). The defaults let ordinary tests
    through untouched."""

    max_log_range: int = 2_000  # blocks per eth_getLogs, both ends counted
    max_log_results: int = 10_000
    max_batch: int = 10  # calls per JSON-RPC batch; 0: batches refused outright
    batch_refusal: str = "object"  # "object": one error for the batch; "each": per call
    burst: int = 10_000
    per_s: float = 10_000.0
    retry_after_s: int = 1
    throttle_next: int = 0
    # Methods and block tags this node does not serve (any kind): e.g. "eth_feeHistory",
    # or {"safe", "finalized"} for a node from before the merge's tags.
    missing_methods: set[str] = field(default_factory=set)
    missing_block_tags: set[str] = field(default_factory=set)
    state_overrides: bool = True  # False: eth_call refuses a third parameter


def error(code: int, message: str) -> dict[str, Any]:
    return {"code": code, "message": message}


def method_refusal(kind: NodeKind, method: str, limits: RelayLimits) -> dict[str, Any] | None:
    """The error a node of `kind` answers `method` with before running it, if any."""
    missing = error(METHOD_NOT_FOUND, f"the method {method} does not exist/is not available")
    if method in limits.missing_methods:
        return missing
    if not kind.capped:
        return None
    if method.startswith(DEV_NAMESPACES):
        return missing
    if method.startswith("debug_") and (kind is NodeKind.PUBLIC or method not in TRACES):
        return missing
    return None


def params_refusal(
    kind: NodeKind, method: str, params: list[Any], limits: RelayLimits
) -> dict[str, Any] | None:
    """The error for parameters this kind does not take (tracers, tags, overrides)."""
    for tag in limits.missing_block_tags:
        if tag in params or any(isinstance(p, dict) and tag in p.values() for p in params):
            return error(INVALID_PARAMS, f'invalid block tag "{tag}": unknown block')
    if method == "eth_call" and len(params) > 2 and not limits.state_overrides:
        return error(INVALID_PARAMS, "too many arguments, want at most 2")
    if kind is NodeKind.HOSTED and method in TRACES:
        return _tracer_refusal(trace_options(method, params))
    return None


def trace_options(method: str, params: list[Any]) -> dict[str, Any]:
    """The options object of a debug_trace* call (after the call and block, or the hash)."""
    at = 2 if method == "debug_traceCall" else 1
    options = params[at] if len(params) > at else None
    return options if isinstance(options, dict) else {}


def _tracer_refusal(options: dict[str, Any]) -> dict[str, Any] | None:
    tracer = options.get("tracer")
    allowed = ", ".join(sorted(HOSTED_TRACERS))
    if tracer is None:
        return error(INVALID_PARAMS, f"tracer is required: this endpoint serves {allowed}")
    if tracer not in HOSTED_TRACERS:
        shown = "a JavaScript tracer" if "{" in str(tracer) else f'tracer "{tracer}"'
        return error(SERVER_ERROR, f"{shown} is not supported: this endpoint serves {allowed}")
    return None


def range_refusal(from_block: int, to_block: int, limits: RelayLimits) -> dict[str, Any] | None:
    """A provider's refusal of an eth_getLogs over too many blocks."""
    if to_block - from_block + 1 > limits.max_log_range:
        return error(
            INVALID_PARAMS,
            f"block range too large: eth_getLogs is limited to a {limits.max_log_range} "
            "block range",
        )
    return None


def results_refusal(count: int, limits: RelayLimits) -> dict[str, Any] | None:
    if count > limits.max_log_results:
        return error(LIMIT_EXCEEDED, f"query returned more than {limits.max_log_results} results")
    return None


def batch_refusal(size: int, limits: RelayLimits) -> dict[str, Any] | None:
    if limits.max_batch == 0:
        return error(INVALID_REQUEST, "batch requests are not supported on this plan")
    if size > limits.max_batch:
        return error(
            INVALID_REQUEST,
            f"batch size too large: at most {limits.max_batch} requests per batch",
        )
    return None


RATE_LIMITED = error(
    429,
    "Your app has exceeded its compute units per second capacity. "
    "Please retry after the time given in Retry-After.",
)
