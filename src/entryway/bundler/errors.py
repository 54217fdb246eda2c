"""Bundler errors with the JSON-RPC codes of ERC-4337 / ERC-7769."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from entryway.chain.rpc import RpcError, RpcTransportError
from entryway.chain.transport import NODE_MALFORMED, NODE_UNREACHABLE
from entryway.errors import EntrywayError


class RpcErrorCode(IntEnum):
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    # ERC-7769 (bundler RPC):
    REJECTED_BY_EP_OR_ACCOUNT = -32500  # simulateValidation failed in account creation/validation
    REJECTED_BY_PAYMASTER = -32501  # the paymaster's validatePaymasterUserOp failed
    BANNED_OPCODE = -32502  # an ERC-7562 opcode or storage rule was broken
    SHORT_DEADLINE = -32503  # validUntil too soon, or validAfter in the future
    BANNED_OR_THROTTLED = -32504  # an entity is banned/throttled by reputation
    STAKE_TOO_LOW = -32505  # an unstaked entity over its mempool allowance (UREP-010/020)
    UNSUPPORTED_AGGREGATOR = -32506
    INVALID_SIGNATURE = -32507  # the account or paymaster returned a failed signature
    PAYMASTER_DEPOSIT_TOO_LOW = -32508
    EXECUTION_REVERTED = -32521  # the op's execution (callData) reverted, when estimating


class BundlerError(EntrywayError):
    """An error the bundler reports to its JSON-RPC caller."""

    def __init__(self, code: RpcErrorCode, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_rpc(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": int(self.code), "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def node_failure(exc: RpcError | RpcTransportError) -> BundlerError:
    """A node failure as a JSON-RPC client reads it (-32603, worth retrying). An unreachable
    node is named as such, in the transport's words (no host, port or exception); an error
    the node answered is passed on as the node put it."""
    if isinstance(exc, RpcTransportError):
        return BundlerError(RpcErrorCode.INTERNAL_ERROR, str(exc))
    return BundlerError(RpcErrorCode.INTERNAL_ERROR, f"node error: {exc}")


def node_unanswered(answer: dict[str, Any]) -> bool:
    """Whether a JSON-RPC answer is the error of a node that gave no answer (down, hung or
    garbled): worth the HTTP status that tells clients to come back (503)."""
    error = answer.get("error")
    return (
        isinstance(error, dict)
        and error.get("code") == int(RpcErrorCode.INTERNAL_ERROR)
        and error.get("message") in (NODE_UNREACHABLE, NODE_MALFORMED)
    )


def invalid_params(message: str) -> BundlerError:
    return BundlerError(RpcErrorCode.INVALID_PARAMS, message)
