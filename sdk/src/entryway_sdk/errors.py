"""One root, `EntrywayError`; the service's REST problems (RFC 9457, by their stable `code`)
and its JSON-RPC errors (ERC-4337 / ERC-7769 codes) as typed exceptions.

    EntrywayError
    ├── ConfigurationError            the client was set up without a service URL (a ValueError)
    ├── ApiError                      a problem+json answer (status, code, detail, problem)
    │   ├── InvalidApiKeyError        invalid_api_key (401)
    │   ├── ChainNotRecognisedError   chain_not_recognised (403), `.checks`
    │   ├── PlanNetworkNotAllowedError plan_network_not_allowed (403)
    │   ├── NetworkConnectionError    network_connection_problem (503), `.checks`; also raised
    │   │   │                          when the RPC given to the SDK does not answer
    │   │   └── NetworkMismatchError  the RPC answers another chain id than the one asked for
    │   ├── ValidationError           validation_error (422), `.errors`
    │   ├── RateLimitedError          rate_limited (429), `.retry_after`
    │   └── NotFoundError             *_not_found, or any other 404 (document_not_stored)
    ├── JsonRpcError                  a JSON-RPC error (`.rpc_code`, `.message`, `.data`)
    │   └── UserOperationRejectedError  -32500…-32508, -32521, -32602 on a UserOperation
    │       └── SponsorshipRefusedError   the paymaster's policy refused (`.rule`, `.policy_id`)
    ├── UserOperationDroppedError     the bundler dropped the op before inclusion (`.reason`)
    ├── UserOperationTimeoutError     no receipt within the wait
    ├── SignerRequiredError           the op needs the owner's signature and no owner was given
    ├── WebhookVerificationError      a webhook's signature or timestamp does not verify
    ├── ProofFormatError              not a well-formed entryway-proof/1 document (a ValueError)
    │   └── UnsupportedProofError     another proof version or other hashing rules
    ├── NotarizationFailedError       the service gave up anchoring a notarization (`.error`)
    └── NotarizationTimeoutError      no proof within the wait
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from entryway_sdk import abi


class EntrywayError(Exception):
    """Base class of every error the SDK raises on purpose."""


class ConfigurationError(EntrywayError, ValueError):
    """The client cannot be set up from what it was given (no service URL, say)."""


@dataclass(frozen=True, slots=True)
class Check:
    """One of the checks the service lists with `chain_not_recognised` or
    `network_connection_problem`, and whether it passed."""

    name: str
    passed: bool
    detail: str | None = None

    @classmethod
    def parse(cls, raw: Any) -> Check:
        if not isinstance(raw, Mapping):
            return cls(str(raw), False)
        detail = raw.get("detail")
        return cls(str(raw.get("check", "")), bool(raw.get("passed")), detail and str(detail))


class ApiError(EntrywayError):
    """A REST error answered as RFC 9457 problem details."""

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        code: str = "",
        title: str = "",
        problem: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{code}: {detail}" if code else detail)
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.problem: Mapping[str, Any] = problem or {}


class InvalidApiKeyError(ApiError):
    """The API key is missing, unknown, malformed or revoked."""


class _CheckedError(ApiError):
    @property
    def checks(self) -> list[Check]:
        return [Check.parse(c) for c in self.problem.get("checks") or []]

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]


class ChainNotRecognisedError(_CheckedError):
    """The chain is not enabled for the project, the key has no access to it, or the Account
    Abstraction module is off; `checks` says which."""


class PlanNetworkNotAllowedError(ApiError):
    """The project's plan (FREE) does not include this network (a mainnet)."""


class NetworkConnectionError(_CheckedError):
    """The chain's RPC does not answer, answers another chain id, or is under maintenance."""


class NetworkMismatchError(NetworkConnectionError):
    """The RPC URL given to the SDK belongs to another chain than the chain id given."""

    def __init__(self, rpc_url: str, expected: int, actual: int) -> None:
        super().__init__(
            f"the RPC at {rpc_url} serves chain {actual}, not chain {expected}: give an RPC URL "
            f"of chain {expected}, or chain_id={actual}",
            code="network_mismatch",
            title="RPC serves another chain",
        )
        self.rpc_url = rpc_url
        self.expected_chain_id = expected
        self.actual_chain_id = actual


class ValidationError(ApiError):
    """A request field the service refused; `errors` lists each (location, message)."""

    @property
    def errors(self) -> list[Mapping[str, Any]]:
        return list(self.problem.get("errors") or [])


class RateLimitedError(ApiError):
    """Over the plan's request rate; `retry_after` is in seconds (None if not given)."""

    def __init__(self, detail: str, *, retry_after: float | None = None, **kw: Any) -> None:
        super().__init__(detail, **kw)
        self.retry_after = retry_after


class NotFoundError(ApiError):
    """Unknown, or another project's (op_not_found, task_not_found, not_found, ...), or
    absent (document_not_stored)."""


class JsonRpcError(EntrywayError):
    """A JSON-RPC error answer: `rpc_code`, `message` and `data` as the server sent them."""

    def __init__(self, rpc_code: int, message: str, data: Any = None, method: str = "") -> None:
        super().__init__(
            f"{method}: {message} ({rpc_code})" if method else f"{message} ({rpc_code})"
        )
        self.rpc_code = rpc_code
        self.message = message
        self.data = data
        self.method = method
        # For -32005 (a rate limit), the seconds the service asked to wait (Retry-After).
        self.retry_after: float | None = None


class UserOperationRejectedError(JsonRpcError):
    """The bundler, the EntryPoint, the account or the paymaster refused a UserOperation
    (ERC-7769 codes: -32500 account/EntryPoint, -32501 paymaster, -32502 ERC-7562 rule,
    -32503 validity window, -32504 reputation, -32505 stake, -32507 signature, -32508
    paymaster deposit, -32521 execution reverted, -32602 invalid fields)."""

    @property
    def revert_data(self) -> bytes | None:
        """What the op's execution reverted with (-32521, from estimation)."""
        raw = self.data.get("revertData") if isinstance(self.data, Mapping) else None
        return bytes.fromhex(raw[2:]) if isinstance(raw, str) and raw.startswith("0x") else None

    @property
    def account_error(self) -> tuple[str, tuple[Any, ...]] | None:
        """The revert data decoded as a SmartAccount error, e.g. ("RecoveryNotDue", (t,)),
        or Solidity's ("Error", (message,)); None if it is neither."""
        data = self.revert_data
        return None if data is None else abi.load("SmartAccount").decode_error(data)


class SponsorshipRefusedError(UserOperationRejectedError):
    """The paymaster would not sponsor the op: `rule` names the policy rule that refused
    (`spend_cap`, `allowed_targets`, `policy_unknown`, ...), `policy_id` the policy."""

    @property
    def rule(self) -> str | None:
        rule = self.data.get("rule") if isinstance(self.data, Mapping) else None
        return str(rule) if rule is not None else None

    @property
    def policy_id(self) -> str | None:
        policy = self.data.get("policyId") if isinstance(self.data, Mapping) else None
        return str(policy) if policy is not None else None


class UserOperationDroppedError(EntrywayError):
    """The bundler dropped the op before it was included (expired, replaced, throttled...)."""

    def __init__(self, user_op_hash: str, reason: str | None) -> None:
        super().__init__(f"UserOperation {user_op_hash} was dropped: {reason or 'no reason'}")
        self.user_op_hash = user_op_hash
        self.reason = reason


class UserOperationTimeoutError(EntrywayError, TimeoutError):
    """No receipt within the time waited; the op may still be included later."""

    def __init__(self, user_op_hash: str, timeout: float, status: str | None) -> None:
        super().__init__(
            f"no receipt for UserOperation {user_op_hash} after {timeout:g} s "
            f"(last status: {status or 'unknown'})"
        )
        self.user_op_hash = user_op_hash
        self.status = status


class SignerRequiredError(EntrywayError):
    """The operation must be signed by the account's owner and the wallet has no owner."""


class WebhookVerificationError(EntrywayError):
    """The request is not a valid, fresh webhook signed with one of the given secrets."""


class ProofFormatError(EntrywayError, ValueError):
    """The proof is not a well-formed `entryway-proof/1` document; the message says why."""


class UnsupportedProofError(ProofFormatError):
    """The proof is of another version, or names other hashing rules, than this SDK reads."""


class NotarizationFailedError(EntrywayError):
    """Every attempt to anchor the notarization's batch failed; `error` is the service's
    reason. Notarize the document again."""

    def __init__(self, notarization_id: str, error: str | None) -> None:
        super().__init__(
            f"notarization {notarization_id} failed: {error or 'the service gave no reason'}"
        )
        self.notarization_id = notarization_id
        self.error = error


class NotarizationTimeoutError(EntrywayError, TimeoutError):
    """No proof within the time waited; the notarization may still be anchored later."""

    def __init__(self, notarization_id: str, timeout: float, status: str | None) -> None:
        super().__init__(
            f"no proof for notarization {notarization_id} after {timeout:g} s "
            f"(status: {status or 'unknown'})"
        )
        self.notarization_id = notarization_id
        self.timeout = timeout
        self.status = status


_BY_CODE: dict[str, type[ApiError]] = {
    "invalid_api_key": InvalidApiKeyError,
    "chain_not_recognised": ChainNotRecognisedError,
    "plan_network_not_allowed": PlanNetworkNotAllowedError,
    "network_connection_problem": NetworkConnectionError,
    "validation_error": ValidationError,
    "rate_limited": RateLimitedError,
}
_USER_OP_CODES = frozenset({-32602, -32521, *range(-32508, -32499)})
_USER_OP_METHODS = frozenset(
    {
        "eth_sendUserOperation",
        "eth_estimateUserOperationGas",
        "pm_getPaymasterStubData",
        "pm_getPaymasterData",
    }
)


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: rare enough to leave to the caller's default


def problem_error(status: int, body: Any, headers: Mapping[str, str] | None = None) -> ApiError:
    """The exception for one REST error answer (problem+json, or anything else)."""
    problem: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    code = str(problem.get("code") or "")
    # The JSON-RPC endpoint answers some conditions (a node or database away: 503) with a
    # JSON-RPC error under the HTTP status: its message says what happened.
    said = problem.get("error")
    told = str(said.get("message") or "") if isinstance(said, Mapping) else ""
    detail = str(problem.get("detail") or problem.get("title") or told or f"HTTP {status}")
    kw: dict[str, Any] = {
        "status": status,
        "code": code,
        "title": str(problem.get("title") or ""),
        "problem": problem,
    }
    if code == "rate_limited" or status == 429:
        header = (headers or {}).get("retry-after") or (headers or {}).get("Retry-After")
        kw["code"] = code or "rate_limited"
        return RateLimitedError(detail, retry_after=_retry_after(header), **kw)
    kind = _BY_CODE.get(code)
    if kind is None and (code.endswith("not_found") or status == 404):
        kind = NotFoundError
    if kind is None and not code and status == 401:
        kind = InvalidApiKeyError
    return (kind or ApiError)(detail, **kw)


def rpc_error(error: Any, method: str = "") -> JsonRpcError:
    """The exception for one JSON-RPC `error` object."""
    if not isinstance(error, Mapping):
        return JsonRpcError(-32603, f"malformed error {error!r}", method=method)
    code = int(error.get("code", -32603))
    message = str(error.get("message", ""))
    data = error.get("data")
    if isinstance(data, Mapping) and data.get("rule") and method.startswith("pm_"):
        return SponsorshipRefusedError(code, message, data, method)
    if code in _USER_OP_CODES and (method in _USER_OP_METHODS or code != -32602):
        return UserOperationRejectedError(code, message, data, method)
    return JsonRpcError(code, message, data, method)
