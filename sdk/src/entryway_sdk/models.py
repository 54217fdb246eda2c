"""What the service answers, as small immutable records: integers for credits, gas and wei;
datetimes in UTC. Each keeps the answer it was read from in `raw` (fields added later by the
service are there before the SDK names them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from eth_utils.address import to_checksum_address

from entryway_sdk._hex import quantity


def _time(value: Any) -> datetime | None:
    if value is None:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _required_time(value: Any) -> datetime:
    moment = _time(value)
    if moment is None:
        raise ValueError("missing timestamp")
    return moment


def _optional_int(value: Any) -> int | None:
    return None if value is None or isinstance(value, Mapping) else quantity(value)


def _optional_bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _raw() -> Any:
    """The answer a record was read from: not shown, not compared."""
    return field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class SdkDefaults:
    """`/get-sdk-defaults`: where Entryway's contracts and bundler are on one chain."""

    chain_id: int
    network: str
    testnet: bool
    native_token: str
    explorer: str
    entry_point: str
    account_factory: str
    paymaster: str
    notary: str
    bundler_url: str
    min_priority_fee_per_gas: int
    # EntryPoint v0.7 beside v0.8, where the chain carries it: its address, Entryway's
    # paymaster for it, that release's SimpleAccountFactory.
    entry_point_v07: str | None = None
    paymaster_v07: str | None = None
    simple_account_factory_v07: str | None = None
    # EntryPoint v0.9 likewise (on a devnet, where its release candidate is).
    entry_point_v09: str | None = None
    paymaster_v09: str | None = None
    simple_account_factory_v09: str | None = None
    # EntryPoint v0.6 (at its canonical address) likewise, on services that name it.
    entry_point_v06: str | None = None
    paymaster_v06: str | None = None
    simple_account_factory_v06: str | None = None
    # The code an EIP-7702 EOA delegates to (Simple7702Account), on services that name it.
    simple_7702_account: str | None = None
    raw: Mapping[str, Any] = _raw()

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> SdkDefaults:
        def optional_address(name: str) -> str | None:
            value = raw.get(name)
            return None if not value else str(to_checksum_address(value))

        return cls(
            chain_id=int(raw["chainId"]),
            network=str(raw.get("network", "")),
            testnet=bool(raw.get("testnet")),
            native_token=str(raw.get("nativeToken", "")),
            explorer=str(raw.get("explorer", "")),
            entry_point=to_checksum_address(raw["entryPoint"]),
            account_factory=to_checksum_address(raw["accountFactory"]),
            paymaster=to_checksum_address(raw["paymaster"]),
            notary=to_checksum_address(raw["notary"]),
            bundler_url=str(raw.get("bundlerUrl", "")),
            min_priority_fee_per_gas=quantity(raw.get("minPriorityFeePerGas") or 0),
            entry_point_v07=optional_address("entryPointV07"),
            paymaster_v07=optional_address("paymasterV07"),
            simple_account_factory_v07=optional_address("simpleAccountFactoryV07"),
            entry_point_v09=optional_address("entryPointV09"),
            paymaster_v09=optional_address("paymasterV09"),
            simple_account_factory_v09=optional_address("simpleAccountFactoryV09"),
            entry_point_v06=optional_address("entryPointV06"),
            paymaster_v06=optional_address("paymasterV06"),
            simple_account_factory_v06=optional_address("simpleAccountFactoryV06"),
            simple_7702_account=optional_address("simple7702Account"),
            raw=raw,
        )


@dataclass(frozen=True, slots=True)
class CreditLot:
    lot_id: str
    kind: str
    amount: int
    remaining: int
    granted_at: datetime
    expires_at: datetime
    expired: bool


@dataclass(frozen=True, slots=True)
class Credits:
    """`/v1/credits`: the project's balance and this billing cycle's use, in credits."""

    balance: int
    plan: str
    monthly_credits: int | None
    used_this_cycle: int
    overage_this_cycle: int
    cycle_start: datetime
    cycle_end: datetime
    lots: tuple[CreditLot, ...] = ()
    raw: Mapping[str, Any] = _raw()

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Credits:
        lots = tuple(
            CreditLot(
                lot_id=str(lot["lotId"]),
                kind=str(lot["kind"]),
                amount=int(lot["amount"]),
                remaining=int(lot["remaining"]),
                granted_at=_required_time(lot["grantedAt"]),
                expires_at=_required_time(lot["expiresAt"]),
                expired=bool(lot["expired"]),
            )
            for lot in raw.get("lots") or []
        )
        return cls(
            balance=int(raw["balance"]),
            plan=str(raw["plan"]),
            monthly_credits=_optional_int(raw.get("monthlyCredits")),
            used_this_cycle=int(raw.get("usedThisCycle", 0)),
            overage_this_cycle=int(raw.get("overageThisCycle", 0)),
            cycle_start=_required_time(raw["cycleStart"]),
            cycle_end=_required_time(raw["cycleEnd"]),
            lots=lots,
            raw=raw,
        )


@dataclass(frozen=True, slots=True)
class OpStatus:
    """`/op-status`: pending, submitted, included, failed (mined, execution reverted),
    dropped (with `reason`) or not_found. `credits` is what the op was charged, when the
    service reports it (None otherwise); `l1_fee`, a mined op's share of its bundle's L1 data
    fee on OP-stack chains (wei; None elsewhere). A mined op's `confirmations` count its
    block and every block on it; `final` says whether that is past the chain's finality
    depth, where the service knows it (None otherwise, and for an op not mined)."""

    chain_id: int
    user_op_hash: str
    status: str
    transaction_hash: str | None = None
    reason: str | None = None
    credits: int | None = None
    l1_fee: int | None = None
    confirmations: int | None = None
    final: bool | None = None
    raw: Mapping[str, Any] = _raw()

    @classmethod
    def parse(cls, raw: Mapping[str, Any], chain_id: int | None = None) -> OpStatus:
        return cls(
            chain_id=int(raw.get("chainId", chain_id or 0)),
            user_op_hash=str(raw.get("userOpHash", "")),
            status=str(raw["status"]),
            transaction_hash=raw.get("transactionHash"),
            reason=raw.get("reason"),
            credits=_optional_int(raw.get("credits")),
            l1_fee=quantity(raw["l1Fee"]) if raw.get("l1Fee") is not None else None,
            confirmations=_optional_int(raw.get("confirmations")),
            final=_optional_bool(raw.get("final")),
            raw=raw,
        )


@dataclass(frozen=True, slots=True)
class PendingRecovery:
    new_owner: str
    execute_after: int  # unix seconds


@dataclass(frozen=True, slots=True)
class AccountInfo:
    """`/account-info`: the account as the chain sees it."""

    chain_id: int
    address: str
    deployed: bool
    nonce: int
    deposit: int  # wei at the EntryPoint
    smart_account: bool
    owner: str | None
    guardians: tuple[str, ...]
    threshold: int
    pending_recovery: PendingRecovery | None
    raw: Mapping[str, Any] = _raw()

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> AccountInfo:
        pending = raw.get("pendingRecovery")
        return cls(
            chain_id=int(raw["chainId"]),
            address=to_checksum_address(raw["address"]),
            deployed=bool(raw["deployed"]),
            nonce=quantity(raw["nonce"]),
            deposit=quantity(raw.get("deposit") or 0),
            smart_account=bool(raw.get("smartAccount")),
            owner=to_checksum_address(raw["owner"]) if raw.get("owner") else None,
            guardians=tuple(to_checksum_address(g) for g in raw.get("guardians") or []),
            threshold=int(raw.get("threshold") or 0),
            pending_recovery=(
                PendingRecovery(
                    to_checksum_address(pending["newOwner"]), int(pending["executeAfter"])
                )
                if pending
                else None
            ),
            raw=raw,
        )


@dataclass(frozen=True, slots=True)
class TaskStatus:
    """`/task-status`: queued, running, succeeded or dead, with attempts and result or error."""

    id: str
    kind: str
    state: str
    attempts: int
    max_attempts: int
    created_at: datetime | None
    updated_at: datetime | None
    finished_at: datetime | None
    result: Any
    error: str | None
    raw: Mapping[str, Any] = _raw()

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> TaskStatus:
        return cls(
            id=str(raw["id"]),
            kind=str(raw.get("kind", "")),
            state=str(raw["state"]),
            attempts=int(raw.get("attempts", 0)),
            max_attempts=int(raw.get("maxAttempts", 0)),
            created_at=_time(raw.get("createdAt")),
            updated_at=_time(raw.get("updatedAt")),
            finished_at=_time(raw.get("finishedAt")),
            result=raw.get("result"),
            error=raw.get("error"),
            raw=raw,
        )


@dataclass(frozen=True, slots=True)
class GasPrice:
    """One tier of `entryway_getUserOperationGasPrice`, in wei."""

    max_fee_per_gas: int
    max_priority_fee_per_gas: int


@dataclass(frozen=True, slots=True)
class UserOperationReceipt:
    """`eth_getUserOperationReceipt`: what the EntryPoint says happened to a mined op.

    `success` is the op's own execution; `actual_gas_cost` is in wei; `l1_fee` is, on OP-stack
    chains (Base), the part of it that paid for posting the op's data to L1 (wei; None on
    other chains); `credits` is what the service charged for it, when the service reports it
    (None otherwise). `confirmations` counts the op's block and every block on it; `final`
    says whether that is past the chain's finality depth, where the service knows it (None
    otherwise). A receipt whose block a reorg removed is gone until the op is mined again."""

    user_op_hash: str
    sender: str
    nonce: int
    success: bool
    actual_gas_used: int
    actual_gas_cost: int
    transaction_hash: str
    block_number: int
    paymaster: str | None
    reason: str | None
    logs: tuple[Mapping[str, Any], ...] = ()
    credits: int | None = None
    l1_fee: int | None = None
    confirmations: int | None = None
    final: bool | None = None
    raw: Mapping[str, Any] = _raw()

    @classmethod
    def parse(cls, raw: Mapping[str, Any], credits: int | None = None) -> UserOperationReceipt:
        tx = raw.get("receipt") or {}
        paymaster = raw.get("paymaster")
        reason = raw.get("reason")
        return cls(
            user_op_hash=str(raw["userOpHash"]),
            sender=to_checksum_address(raw["sender"]),
            nonce=quantity(raw["nonce"]),
            success=bool(raw["success"]),
            actual_gas_used=quantity(raw["actualGasUsed"]),
            actual_gas_cost=quantity(raw["actualGasCost"]),
            transaction_hash=str(tx.get("transactionHash") or raw.get("transactionHash")),
            block_number=quantity(tx.get("blockNumber") or raw.get("blockNumber") or 0),
            paymaster=(
                to_checksum_address(paymaster)
                if paymaster and int(str(paymaster), 16) != 0
                else None
            ),
            reason=None if reason in (None, "0x") else str(reason),
            logs=tuple(raw.get("logs") or ()),
            credits=credits,
            l1_fee=quantity(raw["l1Fee"]) if raw.get("l1Fee") is not None else None,
            confirmations=_optional_int(raw.get("confirmations")),
            final=_optional_bool(raw.get("final")),
            raw=raw,
        )
