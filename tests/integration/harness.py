"""Drives the contracts on a real anvil the way a bundler would: builds, signs and sponsors
UserOperations and submits them with `handleOps` from a funded executor key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount

from entryway import contracts
from entryway.chain.rpc import EthClient, RpcError, TransactionFailedError, TxReceipt
from entryway.chain.transactor import Transactor
from entryway.contracts.abi import DecodedError
from entryway.deploy.deployer import Deployment
from entryway.domain.signatures import sign_digest
from entryway.domain.userop import UserOperation, user_op_hash
from entryway.paymaster.signer import ValidityWindow, sign_paymaster_data, with_paymaster_gas

ETHER = 10**18
EP = contracts.load("EntryPoint").abi
ACCOUNT = contracts.load("SmartAccount").abi
FACTORY = contracts.load("AccountFactory").abi
PAYMASTER = contracts.load("VerifyingPaymaster").abi
NOTARY = contracts.load("NotaryAnchor").abi
COUNTER = contracts.load("TestCounter").abi

PM_VERIFICATION_GAS = 60_000
PM_POST_OP_GAS = 0
FAR_FUTURE = 2**48 - 1


@dataclass(frozen=True)
class OpOutcome:
    """One UserOperationEvent: what the EntryPoint says happened to an op."""

    user_op_hash: bytes
    sender: str
    paymaster: str
    success: bool
    actual_gas_cost: int
    actual_gas_used: int


@dataclass(frozen=True)
class Bundle:
    receipt: TxReceipt
    outcomes: list[OpOutcome]


@dataclass
class Harness:
    eth: EthClient
    chain_id: int
    deployment: Deployment
    paymaster_signer: LocalAccount
    operator: LocalAccount
    executor: Transactor
    _funded: set[str] = field(default_factory=set)

    # -------------------------------------------------------------- reads

    async def call(self, to: str, abi: Any, fn: str, *args: Any, sender: str | None = None) -> Any:
        raw = await self.eth.call(to, abi.encode_call(fn, *args), sender=sender)
        out = abi.decode_output(fn, raw)
        return out[0] if len(out) == 1 else out

    async def account_address(self, owner: str, salt: int = 0) -> str:
        return str(
            await self.call(self.deployment.account_factory, FACTORY, "getAddress", owner, salt)
        )

    async def on_chain_hash(self, op: UserOperation) -> bytes:
        return bytes(await self.call(self.deployment.entry_point, EP, "getUserOpHash", op.packed()))

    # -------------------------------------------------------------- accounts and funding

    async def fund(self, address: str, wei: int) -> None:
        await self.eth.rpc.request("anvil_setBalance", [address, hex(wei)])

    @staticmethod
    def new_key() -> LocalAccount:
        account: LocalAccount = Account.create()
        return account

    # -------------------------------------------------------------- building ops

    async def fees(self) -> tuple[int, int]:
        block = await self.eth.get_block("latest")
        base_fee = int(block["baseFeePerGas"], 16)
        priority = 30 * 10**9
        return 2 * base_fee + priority, priority

    async def build_op(
        self,
        owner: str,
        call_data: bytes,
        *,
        salt: int = 0,
        factory_address: str | None = None,
        factory_abi: Any = FACTORY,
        sender: str | None = None,
        nonce: int | None = None,
        verification_gas: int = 600_000,
        call_gas: int = 300_000,
    ) -> UserOperation:
        factory = factory_address or self.deployment.account_factory
        if sender is None:
            raw = await self.eth.call(factory, factory_abi.encode_call("getAddress", owner, salt))
            sender = str(factory_abi.decode_output("getAddress", raw)[0])
        deployed = bool(await self.eth.get_code(sender))
        if nonce is None:
            nonce = int(await self.call(self.deployment.entry_point, EP, "getNonce", sender, 0))
        max_fee, priority = await self.fees()
        return UserOperation(
            sender=sender,
            nonce=nonce,
            call_data=call_data,
            call_gas_limit=call_gas,
            verification_gas_limit=verification_gas,
            pre_verification_gas=60_000,
            max_fee_per_gas=max_fee,
            max_priority_fee_per_gas=priority,
            factory=None if deployed else factory,
            factory_data=b"" if deployed else factory_abi.encode_call("createAccount", owner, salt),
        )

    def sign(
        self, op: UserOperation, key: LocalAccount, chain_id: int | None = None
    ) -> UserOperation:
        digest = user_op_hash(op, self.deployment.entry_point, chain_id or self.chain_id)
        return op.with_signature(sign_digest(bytes(key.key), digest))

    def sponsor(
        self,
        op: UserOperation,
        *,
        signer: LocalAccount | None = None,
        valid_until: int = FAR_FUTURE,
        valid_after: int = 0,
        chain_id: int | None = None,
        tamper: bool = False,
    ) -> UserOperation:
        """Attach paymasterAndData signed by the service signer (or `signer`)."""
        pm = self.deployment.paymaster
        draft = with_paymaster_gas(op, pm, PM_VERIFICATION_GAS, PM_POST_OP_GAS)
        key = signer or self.paymaster_signer
        window = ValidityWindow(valid_until, valid_after)
        data = sign_paymaster_data(bytes(key.key), draft, chain_id or self.chain_id, window)
        if tamper:  # the signature's first byte, after the 12 bytes of the window
            data = data[:12] + bytes([data[12] ^ 1]) + data[13:]
        return draft.with_paymaster(pm, PM_VERIFICATION_GAS, PM_POST_OP_GAS, data)

    # -------------------------------------------------------------- submitting

    def handle_ops_data(self, ops: list[UserOperation]) -> bytes:
        return EP.encode_call("handleOps", [op.packed() for op in ops], self.executor.address)

    async def handle_ops(self, ops: list[UserOperation]) -> Bundle:
        try:
            receipt = await self.executor.send(
                self.deployment.entry_point, self.handle_ops_data(ops), gas=8_000_000
            )
        except TransactionFailedError as exc:  # say why, as the chain sees it now
            block = await self.eth.get_block("latest")
            now = f"block {int(block['number'], 16)} at {int(block['timestamp'], 16)}"
            try:
                why: object = await self.handle_ops_error(ops)
            except AssertionError as replayed:
                why = replayed
            raise AssertionError(f"{exc}; replayed on {now}: {why}") from exc
        topic = EP.event_topic("UserOperationEvent")
        outcomes = []
        for log in receipt.logs:
            if log.address == self.deployment.entry_point and log.topics[0] == topic:
                event = EP.decode_event("UserOperationEvent", log.topics, log.data)
                outcomes.append(
                    OpOutcome(
                        user_op_hash=event["userOpHash"],
                        sender=event["sender"],
                        paymaster=event["paymaster"],
                        success=event["success"],
                        actual_gas_cost=event["actualGasCost"],
                        actual_gas_used=event["actualGasUsed"],
                    )
                )
        return Bundle(receipt, outcomes)

    async def handle_ops_error(self, ops: list[UserOperation]) -> DecodedError:
        """Simulate handleOps, expecting the EntryPoint to refuse; return its decoded error."""
        try:
            await self.eth.call(
                self.deployment.entry_point,
                self.handle_ops_data(ops),
                sender=self.executor.address,
            )
        except RpcError as exc:
            data = exc.revert_data
            assert data is not None, f"no revert data in {exc}"
            decoded = EP.decode_error(data)
            assert decoded is not None, f"undecodable revert 0x{data.hex()}"
            return decoded
        raise AssertionError("handleOps did not revert")

    async def send_from(
        self, key: LocalAccount, to: str, data: bytes, *, value: int = 0
    ) -> TxReceipt:
        if await self.eth.get_balance(key.address) < ETHER + value:
            await self.fund(key.address, 10 * ETHER + value)
        return await Transactor(self.eth, key, self.chain_id).send(to, data, value=value)

    async def revert_error(
        self, to: str, abi: Any, data: bytes, sender: str | None = None
    ) -> DecodedError:
        try:
            await self.eth.call(to, data, sender=sender)
        except RpcError as exc:
            raw = exc.revert_data
            assert raw is not None, f"no revert data in {exc}"
            decoded = abi.decode_error(raw)
            assert decoded is not None, f"undecodable revert 0x{raw.hex()}"
            return decoded  # type: ignore[no-any-return]
        raise AssertionError("call did not revert")

    # -------------------------------------------------------------- time

    async def advance_time(self, seconds: int) -> None:
        await self.eth.rpc.request("evm_increaseTime", [seconds])
        await self.eth.rpc.request("evm_mine", [])

    async def latest_timestamp(self) -> int:
        return int((await self.eth.get_block("latest"))["timestamp"], 16)


def self_call(account: str, inner: bytes) -> bytes:
    """Call data making the account call itself (guardian and recovery management)."""
    return ACCOUNT.encode_call("execute", account, 0, inner)
