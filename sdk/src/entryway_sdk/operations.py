"""Sending a UserOperation the ERC-4337 / ERC-7677 way, and following it to its receipt.

The pipeline (`submit`): fees from `entryway_getUserOperationGasPrice` → paymaster stub
(`pm_getPaymasterStubData`) → `eth_estimateUserOperationGas` → signed paymaster data
(`pm_getPaymasterData`) → the account's signer signs the userOpHash → `eth_sendUserOperation`,
each step naming the EntryPoint the op goes through (v0.8 for Entryway's SmartAccount, v0.7
for an existing account of that release). Unsponsored ops skip the two paymaster steps and pay
from the account's own deposit."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from entryway_sdk import abi
from entryway_sdk._hex import checksum, hex_bytes, quantity, to_hex
from entryway_sdk.errors import (
    ApiError,
    EntrywayError,
    UserOperationDroppedError,
    UserOperationTimeoutError,
)
from entryway_sdk.models import GasPrice, OpStatus, SdkDefaults, UserOperationReceipt
from entryway_sdk.signer import UserOpHashSigner, sign_user_op_hash
from entryway_sdk.transport import NodeRpc, ServiceApi
from entryway_sdk.userop import (
    EntryPointVersion,
    UserOperation,
    entry_point_version,
    user_op_hash,
)

Speed = Literal["slow", "standard", "fast"]
_FINAL = ("included", "failed")
_PVG_PLACEHOLDER = 0xFFFFFF


@dataclass(frozen=True, slots=True)
class SendOptions:
    """How an op is paid and priced.

    `sponsored`: through Entryway's paymaster (ERC-7677), charged to the project's credits;
    otherwise the account pays the gas itself. `policy_id`: the sponsorship policy to apply
    (needed when the project has several active ones). `speed`: the gas price tier."""

    sponsored: bool = True
    policy_id: str | None = None
    speed: Speed = "standard"


class SendKwargs(TypedDict, total=False):
    """`SendOptions` as keyword arguments of the wallet's methods."""

    sponsored: bool
    policy_id: str | None
    speed: Speed


class PendingUserOperation:
    """A UserOperation the bundler accepted: its hash, and the way to its receipt."""

    def __init__(
        self, api: ServiceApi, chain_id: int, user_op_hash: str, op: UserOperation | None = None
    ) -> None:
        self._api = api
        self.chain_id = chain_id
        self.user_op_hash = user_op_hash.lower()
        self.user_operation = op

    def __repr__(self) -> str:
        return f"PendingUserOperation(chain_id={self.chain_id}, hash={self.user_op_hash})"

    async def status(self) -> OpStatus:
        """The service's view of this op (`/op-status`)."""
        raw = await self._api.get(
            "/op-status", {"chainId": self.chain_id, "userOpHash": self.user_op_hash}
        )
        return OpStatus.parse(raw, self.chain_id)

    async def receipt(self) -> UserOperationReceipt | None:
        """The receipt if the op is mined, else None (one `eth_getUserOperationReceipt`)."""
        raw = await self._api.rpc(self.chain_id, "eth_getUserOperationReceipt", [self.user_op_hash])
        return None if raw is None else UserOperationReceipt.parse(raw)

    async def wait(
        self,
        timeout: float = 60.0,  # noqa: ASYNC109 - a deadline for polling, not for one await
        poll_interval: float = 0.5,
    ) -> UserOperationReceipt:
        """Wait until the op is mined and return its receipt (`success` False when its
        execution reverted). Raises UserOperationDroppedError if the bundler dropped it and
        UserOperationTimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        last: str | None = None
        while True:
            answer = await self._api.rpc(
                self.chain_id, "entryway_getUserOperationStatus", [self.user_op_hash]
            )
            last = str(answer.get("status")) if isinstance(answer, dict) else None
            if last == "dropped":
                raise UserOperationDroppedError(self.user_op_hash, answer.get("reason"))
            if last in _FINAL or last == "not_found":
                # not_found: a bundler that restarted forgets its ops; the chain still knows.
                receipt = await self.receipt()
                if receipt is not None:
                    return await self._with_credits(receipt)
            if time.monotonic() >= deadline:
                raise UserOperationTimeoutError(self.user_op_hash, timeout, last)
            await asyncio.sleep(poll_interval)

    async def _with_credits(self, receipt: UserOperationReceipt) -> UserOperationReceipt:
        """The receipt with the credits the service charged for the op, when it says."""
        try:
            status = await self.status()
        except ApiError:
            return receipt
        if status.credits is None:
            return receipt
        return UserOperationReceipt.parse(receipt.raw, credits=status.credits)


class ChainSession:
    """One chain as a client sees it: the service (`api`), the caller's node (`node`),
    Entryway's defaults there, and the EntryPoint ops go through (by default Entryway's,
    v0.8; `at(...)` gives the same chain through another); prepares, signs and sends ops."""

    def __init__(
        self,
        api: ServiceApi,
        node: NodeRpc,
        defaults: SdkDefaults,
        entry_point: str | None = None,
        version: EntryPointVersion | None = None,
    ) -> None:
        self.api = api
        self.node = node
        self.defaults = defaults
        self.chain_id = defaults.chain_id
        self.entry_point = checksum(entry_point or defaults.entry_point)
        self.entry_point_version = version or entry_point_version(self.entry_point)

    def at(self, entry_point: str, version: EntryPointVersion | None = None) -> ChainSession:
        """This chain, its ops going through the EntryPoint at `entry_point` (`version` as
        its address says unless given)."""
        return ChainSession(self.api, self.node, self.defaults, entry_point, version)

    async def _rpc(self, method: str, params: list[Any]) -> Any:
        return await self.api.rpc(self.chain_id, method, params)

    def wire(self, op: UserOperation) -> dict[str, Any]:
        """`op` in the JSON form this session's EntryPoint release speaks."""
        return op.to_rpc_v06() if self.entry_point_version == "0.6" else op.to_rpc()

    def hash(self, op: UserOperation) -> bytes:
        """The userOpHash this session's EntryPoint computes for `op`."""
        return user_op_hash(op, self.entry_point, self.chain_id, version=self.entry_point_version)

    async def nonce(self, sender: str, key: int = 0) -> int:
        """The EntryPoint's next nonce for `sender` under `key` (`getNonce`, read through
        the caller's node)."""
        entry_point = abi.load("EntryPoint")
        raw = await self.node.call(
            self.entry_point, entry_point.encode_call("getNonce", sender, key)
        )
        return int(entry_point.decode_output("getNonce", raw)[0])

    async def gas_price(self, speed: Speed = "standard") -> GasPrice:
        tiers = await self._rpc("entryway_getUserOperationGasPrice", [])
        tier = tiers[speed]
        return GasPrice(quantity(tier["maxFeePerGas"]), quantity(tier["maxPriorityFeePerGas"]))

    def _paymaster_params(self, op: UserOperation, options: SendOptions) -> list[Any]:
        context = {"policyId": options.policy_id} if options.policy_id else {}
        return [self.wire(op), self.entry_point, hex(self.chain_id), context]

    @staticmethod
    def _with_paymaster(op: UserOperation, fields: dict[str, Any]) -> UserOperation:
        if "paymaster" not in fields and "paymasterAndData" in fields:  # v0.6's answer
            joined = hex_bytes(fields["paymasterAndData"], "paymasterAndData")
            if len(joined) < 20:
                raise EntrywayError("the paymaster answered a paymasterAndData with no address")
            return op.with_(paymaster=checksum(joined[:20]), paymaster_data=joined[20:])
        return op.with_(
            paymaster=checksum(str(fields["paymaster"])),
            paymaster_data=hex_bytes(fields.get("paymasterData") or "0x"),
            paymaster_verification_gas_limit=quantity(
                fields.get("paymasterVerificationGasLimit") or 0
            ),
            paymaster_post_op_gas_limit=quantity(fields.get("paymasterPostOpGasLimit") or 0),
        )

    async def prepare(
        self, op: UserOperation, stub_signature: bytes, options: SendOptions
    ) -> UserOperation:
        """`op` with fees, gas limits and (if sponsored) paymaster data, not yet signed.
        `stub_signature` stands in for the real one while the bundler estimates: shaped as
        the account's real signature, so validation costs what it will."""
        price = await self.gas_price(options.speed)
        op = op.with_(
            max_fee_per_gas=price.max_fee_per_gas,
            max_priority_fee_per_gas=price.max_priority_fee_per_gas,
            signature=stub_signature,
        )
        if options.sponsored:
            stub = await self._rpc("pm_getPaymasterStubData", self._paymaster_params(op, options))
            op = self._with_paymaster(op, stub)
        # The bundler prices preVerificationGas on the op as given: a placeholder with as many
        # non-zero bytes as any real value keeps the calldata it counts from falling short.
        priced = op.with_(pre_verification_gas=_PVG_PLACEHOLDER)
        estimate = await self._rpc(
            "eth_estimateUserOperationGas", [self.wire(priced), self.entry_point]
        )
        op = op.with_(
            pre_verification_gas=quantity(estimate["preVerificationGas"]),
            verification_gas_limit=quantity(estimate["verificationGasLimit"]),
            call_gas_limit=quantity(estimate["callGasLimit"]),
        )
        if options.sponsored:
            estimated = quantity(estimate.get("paymasterVerificationGasLimit") or 0)
            op = op.with_(
                paymaster_verification_gas_limit=max(op.paymaster_verification_gas_limit, estimated)
            )
            final = await self._rpc("pm_getPaymasterData", self._paymaster_params(op, options))
            op = self._with_paymaster(op, final)
        return op.with_(signature=b"")

    async def sign(self, op: UserOperation, sign_hash: UserOpHashSigner) -> UserOperation:
        """`op` carrying what `sign_hash` answers for its userOpHash."""
        return op.with_(signature=await sign_user_op_hash(sign_hash, self.hash(op)))

    async def send(self, op: UserOperation) -> PendingUserOperation:
        """Send a prepared (and, if it needs it, signed) op."""
        answer = await self._rpc("eth_sendUserOperation", [self.wire(op), self.entry_point])
        expected = to_hex(self.hash(op))
        if str(answer).lower() != expected:
            raise EntrywayError(
                f"the bundler answered userOpHash {answer}, the SDK computed {expected}"
            )
        return PendingUserOperation(self.api, self.chain_id, expected, op)

    async def submit(
        self,
        op: UserOperation,
        sign_hash: UserOpHashSigner | None,
        options: SendOptions,
        *,
        stub_signature: bytes = b"",
    ) -> PendingUserOperation:
        """Prepare, sign (unless the op authorises itself: `sign_hash` None) and send."""
        prepared = await self.prepare(op, stub_signature, options)
        if sign_hash is not None:
            prepared = await self.sign(prepared, sign_hash)
        return await self.send(prepared)
