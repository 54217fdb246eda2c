"""The bundler as in-process callers use it: typed values in and out, no JSON-RPC.

`BundlerPort` is what use cases (wallets, paymaster) depend on; `InProcessBundler` implements
it over a running `Bundler`. Refusals raise `BundlerError` with their ERC-4337 code, and a
node failure is one too (`INTERNAL_ERROR`), as the JSON-RPC dispatcher would answer them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, NewType, Protocol, TypeVar

from entryway.bundler.deployments import AccountDeployment, account_deployment
from entryway.bundler.errors import BundlerError, RpcErrorCode, node_failure
from entryway.bundler.gas.estimation import GasEstimate, GasEstimator
from entryway.bundler.gas.fee_tiers import GasPrice, fee_tiers
from entryway.bundler.service import BeforeMempool, Bundler
from entryway.bundler.states import OpStatus
from entryway.bundler.validation.sanity import check_bounds
from entryway.chain.rpc import RpcError, RpcTransportError
from entryway.domain.evm import hex_to_bytes, to_hex
from entryway.domain.userop import UserOperation

__all__ = [
    "AccountDeployment",
    "BeforeMempool",
    "BundlerPort",
    "GasEstimate",
    "GasPrice",
    "InProcessBundler",
    "OpStatus",
    "OpStatusReport",
    "Receipt",
    "UserOpHash",
]

T = TypeVar("T")
UserOpHash = NewType("UserOpHash", str)  # 0x-prefixed, lower-case hex


@dataclass(frozen=True, slots=True)
class OpStatusReport:
    status: OpStatus
    transaction_hash: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Receipt:
    """An op's UserOperationEvent and the transaction that carried it."""

    user_op_hash: UserOpHash
    sender: str
    success: bool
    actual_gas_cost: int  # wei
    actual_gas_used: int
    transaction_hash: str
    block_number: int
    reason: str | None = None  # the revert reason, when the execution reverted
    l1_fee: int | None = None  # wei: its share of the bundle's L1 data fee (OP-stack chains)
    deployed: AccountDeployment | None = None  # the account this op deployed, if it did
    entry_point: str | None = None  # the EntryPoint that carried it


class BundlerPort(Protocol):
    """One chain's bundler."""

    @property
    def chain_id(self) -> int: ...

    @property
    def entry_point(self) -> str: ...

    async def send(
        self, op: UserOperation, *, before_mempool: BeforeMempool | None = None
    ) -> UserOpHash:
        """Validate and add to the mempool (`before_mempool` runs in between; if it raises,
        the op is not added)."""
        ...

    async def estimate(self, op: UserOperation) -> GasEstimate: ...

    async def gas_price(self, tier: str = "standard") -> GasPrice:
        """Fees for a new op: "slow", "standard" or "fast"."""
        ...

    async def status(self, user_op_hash: str) -> OpStatusReport: ...

    async def receipt(self, user_op_hash: str) -> Receipt | None: ...


async def suggested_fees(bundler: Bundler) -> dict[str, GasPrice]:
    """Every tier's fees (`entryway.bundler.gas.fee_tiers`) from the latest base fee and the
    node's suggested tip, within the bundler's own bounds."""
    block = await bundler.eth.get_block("latest")
    return fee_tiers(
        base_fee=int(block.get("baseFeePerGas", "0x0"), 16),
        suggested_tip=await bundler.eth.max_priority_fee(),
        min_tip=max(
            bundler.config.min_priority_fee_per_gas, bundler.config.sanity.min_priority_fee_per_gas
        ),
        max_fee=bundler.config.sanity.max_fee_per_gas,
    )


def _hash(user_op_hash: str) -> bytes:
    try:
        raw = hex_to_bytes(user_op_hash)
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise BundlerError(RpcErrorCode.INVALID_PARAMS, f"invalid userOpHash {user_op_hash!r}")
    return raw


class InProcessBundler:
    """`BundlerPort` over the bundler running in this process. Ops are sent to its
    EntryPoint; an op's status and receipt are also looked for with `others`, the bundlers of
    the chain's other EntryPoints (an op sent to v0.7 is settled and reported like any)."""

    def __init__(
        self, bundler: Bundler, estimator: GasEstimator, others: Sequence[Bundler] = ()
    ) -> None:
        self.bundler = bundler
        self.estimator = estimator
        self.others = tuple(others)

    def _knowing(self, op_hash: bytes) -> list[Bundler]:
        """The bundler that has seen the op, alone; all of them when none has."""
        every = [self.bundler, *self.others]
        owner = next((b for b in every if b.tracked.get(op_hash) is not None), None)
        return every if owner is None else [owner]

    @property
    def chain_id(self) -> int:
        return self.bundler.config.chain_id

    @property
    def entry_point(self) -> str:
        return self.bundler.config.entry_point

    async def send(
        self, op: UserOperation, *, before_mempool: BeforeMempool | None = None
    ) -> UserOpHash:
        op_hash = await _node(self.bundler.send(op, before_mempool=before_mempool))
        return UserOpHash(to_hex(op_hash))

    async def estimate(self, op: UserOperation) -> GasEstimate:
        check_bounds(op, self.bundler.config.sanity)
        return await _node(self.estimator.estimate(op))

    async def gas_price(self, tier: str = "standard") -> GasPrice:
        fees = await _node(suggested_fees(self.bundler))
        if tier not in fees:
            raise BundlerError(RpcErrorCode.INVALID_PARAMS, f"no fee tier {tier!r}")
        return fees[tier]

    async def status(self, user_op_hash: str) -> OpStatusReport:
        op_hash = _hash(user_op_hash)
        doc: dict[str, Any] = {"status": OpStatus.NOT_FOUND.value}
        for bundler in self._knowing(op_hash):
            doc = await _node(bundler.status(op_hash))
            if doc["status"] != OpStatus.NOT_FOUND.value:
                break
        return OpStatusReport(
            OpStatus(doc["status"]), doc.get("transactionHash"), doc.get("reason")
        )

    async def receipt(self, user_op_hash: str) -> Receipt | None:
        op_hash = _hash(user_op_hash)
        for bundler in self._knowing(op_hash):
            tracked = bundler.tracked.get(op_hash)
            if tracked is not None and tracked.status in (OpStatus.PENDING, OpStatus.SUBMITTED):
                return None  # not mined yet: its bundle's follower marks it when it is
            doc = await _node(bundler.receipt(op_hash))
            if doc is not None:
                return receipt_of(doc)
        return None


def receipt_of(doc: dict[str, Any]) -> Receipt:
    """A receipt as `ReceiptReader` reads it from the chain."""
    tx = doc["receipt"]
    return Receipt(
        user_op_hash=UserOpHash(str(doc["userOpHash"]).lower()),
        sender=str(doc["sender"]),
        success=bool(doc["success"]),
        actual_gas_cost=int(doc["actualGasCost"], 16),
        actual_gas_used=int(doc["actualGasUsed"], 16),
        transaction_hash=str(tx["transactionHash"]),
        block_number=int(tx["blockNumber"], 16),
        reason=doc.get("reason"),
        l1_fee=int(doc["l1Fee"], 16) if "l1Fee" in doc else None,
        deployed=account_deployment(tx.get("logs", ()), doc["entryPoint"], doc["userOpHash"]),
        entry_point=str(doc["entryPoint"]),
    )


async def _node(call: Awaitable[T]) -> T:
    """A node failure as the bundler reports it: an internal error worth retrying."""
    try:
        return await call
    except (RpcTransportError, RpcError) as exc:
        raise node_failure(exc) from exc
