"""JSON-RPC batches within limits, for every JSON-RPC endpoint (the service's /rpc/{chainId}
and the standalone bundler's /rpc).

A batch must hold 1 to `max_calls` calls, else one -32600 error answers it whole. Inside it,
calls run one after another, in order (an op's nonce may follow the one before it in the same
batch), and two kinds of call are answered -32005 "limit exceeded" (EIP-1474's code, which
bundlers use for throttling) instead of being run: calls past what the caller's rate limit
admits, and heavy calls past `max_heavy`. Heavy calls simulate the operation on the node or
sign for it; a few hundred in one request would hold the node for seconds."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from entryway.bundler.errors import RpcErrorCode

LIMIT_EXCEEDED = -32005
HEAVY_METHODS = frozenset({"eth_estimateUserOperationGas", "eth_sendUserOperation"})
HEAVY_PREFIXES = ("pm_",)  # ERC-7677 paymaster calls estimate, check policies and sign

Answer = dict[str, Any]
Call = Callable[[Any], Awaitable[Answer | None]]


def is_heavy(call: Any) -> bool:
    method = call.get("method") if isinstance(call, dict) else None
    return isinstance(method, str) and (
        method in HEAVY_METHODS or method.startswith(HEAVY_PREFIXES)
    )


def batch_refusal(batch: Sequence[Any], max_calls: int) -> Answer | None:
    """The one error that answers a whole batch (empty, or too long), or None."""
    if not batch:
        return _error(None, RpcErrorCode.INVALID_REQUEST, "invalid request: empty batch")
    if len(batch) > max_calls:
        return _error(
            None,
            RpcErrorCode.INVALID_REQUEST,
            f"invalid request: a batch may hold at most {max_calls} calls, "
            f"this one holds {len(batch)}",
        )
    return None


async def run_batch(
    batch: Sequence[Any],
    call: Call,
    *,
    max_heavy: int,
    admitted: int | None = None,
    over_rate_limit: str = "rate limit exceeded",
) -> list[Answer]:
    """The batch's answers in order (notifications have none). The first `admitted` calls
    (all, if None) are within the caller's rate limit; `over_rate_limit` tells the others."""
    answers: list[Answer] = []
    heavy = 0
    for index, one in enumerate(batch):
        answer: Answer | None
        if admitted is not None and index >= admitted:
            answer = limited(one, over_rate_limit)
        elif is_heavy(one) and heavy >= max_heavy:
            answer = limited(
                one,
                f"limit exceeded: a batch may hold at most {max_heavy} heavy calls "
                "(eth_estimateUserOperationGas, eth_sendUserOperation, pm_*); send the rest "
                "in another request",
            )
        else:
            heavy += is_heavy(one)
            answer = await call(one)
        if answer is not None:
            answers.append(answer)
    return answers


def limited(one: Any, message: str) -> Answer | None:
    """The -32005 answer of a call refused for a limit (none for a notification)."""
    if isinstance(one, dict) and "id" not in one:
        return None  # a notification: never answered, not even with an error
    request_id = one.get("id") if isinstance(one, dict) else None
    return _error(request_id, LIMIT_EXCEEDED, message)


def _error(request_id: Any, code: int, message: str) -> Answer:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": int(code), "message": message}}
