"""A blocking face on the async client, for scripts and notebooks: `EntrywaySync` runs the
async SDK on a private event loop in a background thread, so it works whether or not the
caller's thread already runs a loop. Everything else lives in the async classes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar, Unpack, overload

import httpx

from entryway_sdk.calls import CallLike
from entryway_sdk.client import Entryway
from entryway_sdk.eip7702 import Authorization
from entryway_sdk.eoa import Eip7702Account
from entryway_sdk.existing_account import ExistingAccount
from entryway_sdk.models import (
    AccountInfo,
    Credits,
    GasPrice,
    OpStatus,
    TaskStatus,
    UserOperationReceipt,
)
from entryway_sdk.notarization import (
    HashLike,
    Notarization,
    NotarizationItemLike,
    NotarizationMode,
    NotarizationStatus,
)
from entryway_sdk.operations import PendingUserOperation, SendKwargs, Speed
from entryway_sdk.options import EntrywayOptions
from entryway_sdk.proof import Proof, ProofLike, VerificationResult
from entryway_sdk.recovery import RecoveryApproval
from entryway_sdk.signer import SignerLike
from entryway_sdk.transport import RetryPolicy
from entryway_sdk.wallet import SmartWallet

T = TypeVar("T")


class _LoopThread:
    """One event loop running in a daemon thread until `close`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="entryway-sdk", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class PendingUserOperationSync:
    """`PendingUserOperation`, blocking."""

    def __init__(self, op: PendingUserOperation, loop: _LoopThread) -> None:
        self._op, self._loop = op, loop
        self.user_op_hash = op.user_op_hash
        self.chain_id = op.chain_id

    def wait(self, timeout: float = 60.0, poll_interval: float = 0.5) -> UserOperationReceipt:
        return self._loop.run(self._op.wait(timeout, poll_interval))

    def receipt(self) -> UserOperationReceipt | None:
        return self._loop.run(self._op.receipt())

    def status(self) -> OpStatus:
        return self._loop.run(self._op.status())


class NotarizationSync:
    """`Notarization`, blocking."""

    def __init__(self, notarization: Notarization, loop: _LoopThread) -> None:
        self._n, self._loop = notarization, loop
        self.id = notarization.id
        self.document_hash = notarization.document_hash
        self.chain_id = notarization.chain_id
        self.credits = notarization.credits

    def status(self) -> NotarizationStatus:
        return self._loop.run(self._n.status())

    def proof(self) -> Proof | None:
        return self._loop.run(self._n.proof())

    def wait_for_proof(self, timeout: float = 60.0, poll_interval: float = 0.5) -> Proof:
        return self._loop.run(self._n.wait_for_proof(timeout, poll_interval))

    def document(self) -> bytes:
        return self._loop.run(self._n.document())


class SmartWalletSync:
    """`SmartWallet`, blocking."""

    def __init__(self, wallet: SmartWallet, loop: _LoopThread) -> None:
        self._wallet, self._loop = wallet, loop
        self.address = wallet.address

    def _op(self, coro: Coroutine[Any, Any, PendingUserOperation]) -> PendingUserOperationSync:
        return PendingUserOperationSync(self._loop.run(coro), self._loop)

    def is_deployed(self) -> bool:
        return self._loop.run(self._wallet.is_deployed())

    def nonce(self) -> int:
        return self._loop.run(self._wallet.nonce())

    def info(self) -> AccountInfo:
        return self._loop.run(self._wallet.info())

    def with_owner(self, owner: SignerLike) -> SmartWalletSync:
        return SmartWalletSync(self._wallet.with_owner(owner), self._loop)

    def send(
        self, calls: CallLike | Sequence[CallLike], **options: Unpack[SendKwargs]
    ) -> PendingUserOperationSync:
        return self._op(self._wallet.send(calls, **options))

    def deploy(self, **options: Unpack[SendKwargs]) -> PendingUserOperationSync:
        return self._op(self._wallet.deploy(**options))

    def add_guardian(
        self, guardian: str, **options: Unpack[SendKwargs]
    ) -> PendingUserOperationSync:
        return self._op(self._wallet.add_guardian(guardian, **options))

    def remove_guardian(
        self, guardian: str, **options: Unpack[SendKwargs]
    ) -> PendingUserOperationSync:
        return self._op(self._wallet.remove_guardian(guardian, **options))

    def set_guardian_threshold(
        self, threshold: int, **options: Unpack[SendKwargs]
    ) -> PendingUserOperationSync:
        return self._op(self._wallet.set_guardian_threshold(threshold, **options))

    def recovery_nonce(self) -> int:
        return self._loop.run(self._wallet.recovery_nonce())

    def recovery_approval(self, guardian: SignerLike, new_owner: str) -> RecoveryApproval:
        return self._loop.run(self._wallet.recovery_approval(guardian, new_owner))

    def start_recovery(
        self, new_owner: str, approvals: Sequence[RecoveryApproval], **options: Unpack[SendKwargs]
    ) -> PendingUserOperationSync:
        return self._op(self._wallet.start_recovery(new_owner, approvals, **options))

    def finalize_recovery(self, **options: Unpack[SendKwargs]) -> PendingUserOperationSync:
        return self._op(self._wallet.finalize_recovery(**options))

    def cancel_recovery(self, **options: Unpack[SendKwargs]) -> PendingUserOperationSync:
        return self._op(self._wallet.cancel_recovery(**options))


class ExistingAccountSync:
    """`ExistingAccount`, blocking (its signer callback runs on the SDK's loop thread)."""

    def __init__(self, account: ExistingAccount, loop: _LoopThread) -> None:
        self._account, self._loop = account, loop
        self.address = account.address
        self.entry_point = account.entry_point
        self.entry_point_version = account.entry_point_version

    def is_deployed(self) -> bool:
        return self._loop.run(self._account.is_deployed())

    def nonce(self) -> int:
        return self._loop.run(self._account.nonce())

    def send(
        self,
        calls: CallLike | Sequence[CallLike] | None = None,
        *,
        call_data: bytes | None = None,
        **options: Unpack[SendKwargs],
    ) -> PendingUserOperationSync:
        op = self._loop.run(self._account.send(calls, call_data=call_data, **options))
        return PendingUserOperationSync(op, self._loop)


class Eip7702AccountSync:
    """`Eip7702Account`, blocking."""

    def __init__(self, account: Eip7702Account, loop: _LoopThread) -> None:
        self._account, self._loop = account, loop
        self.address = account.address
        self.implementation = account.implementation

    def delegation(self) -> str | None:
        return self._loop.run(self._account.delegation())

    def is_delegated(self) -> bool:
        return self._loop.run(self._account.is_delegated())

    def nonce(self) -> int:
        return self._loop.run(self._account.nonce())

    def authorize(self, delegate: str | None = None, *, nonce: int | None = None) -> Authorization:
        return self._loop.run(self._account.authorize(delegate, nonce=nonce))

    def send(
        self, calls: CallLike | Sequence[CallLike], **options: Unpack[SendKwargs]
    ) -> PendingUserOperationSync:
        op = self._loop.run(self._account.send(calls, **options))
        return PendingUserOperationSync(op, self._loop)

    def undelegate(self, relayer: SignerLike | None = None, *, timeout: float = 60.0) -> str:
        return self._loop.run(self._account.undelegate(relayer, timeout=timeout))


class EntrywaySync:
    """`Entryway`, blocking: `EntrywaySync.init(...)` takes `Entryway.init`'s arguments
    (an `EntrywayOptions`, or its fields as keywords). Close it (`close()` or `with`) to
    stop its event loop."""

    def __init__(self, client: Entryway, loop: _LoopThread, *, owns_loop: bool) -> None:
        self._client, self._loop, self._owns_loop = client, loop, owns_loop

    @overload
    @classmethod
    def init(
        cls, options: EntrywayOptions, /, *, http: httpx.AsyncClient | None = None
    ) -> EntrywaySync: ...

    @overload
    @classmethod
    def init(
        cls,
        *,
        api_key: str,
        rpc_url: str,
        chain_id: int,
        base_url: str | None = None,
        request_timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> EntrywaySync: ...

    @classmethod
    def init(cls, options: EntrywayOptions | None = None, **settings: Any) -> EntrywaySync:
        loop = _LoopThread()
        try:
            if options is None:
                client = loop.run(Entryway.init(**settings))
            else:
                client = loop.run(Entryway.init(options, **settings))
        except BaseException:
            loop.close()
            raise
        return cls(client, loop, owns_loop=True)

    @property
    def chain_id(self) -> int:
        return self._client.chain_id

    @property
    def client(self) -> Entryway:
        """The async client underneath (its coroutines belong to this wrapper's loop)."""
        return self._client

    def with_chain(self, chain_id: int, rpc_url: str) -> EntrywaySync:
        child = self._loop.run(self._client.with_chain(chain_id, rpc_url))
        return EntrywaySync(child, self._loop, owns_loop=False)

    def switch_chain(self, chain_id: int, rpc_url: str) -> None:
        self._loop.run(self._client.switch_chain(chain_id, rpc_url))

    def credits(self) -> Credits:
        return self._loop.run(self._client.credits())

    def op_status(self, user_op_hash: str) -> OpStatus:
        return self._loop.run(self._client.op_status(user_op_hash))

    def account_info(self, address: str) -> AccountInfo:
        return self._loop.run(self._client.account_info(address))

    def task_status(self, task_id: str) -> TaskStatus:
        return self._loop.run(self._client.task_status(task_id))

    def gas_price(self, speed: Speed = "standard") -> GasPrice:
        return self._loop.run(self._client.gas_price(speed))

    def rpc(self, method: str, params: list[Any] | None = None) -> Any:
        return self._loop.run(self._client.rpc(method, params))

    def notarize_document(
        self,
        data: bytes,
        *,
        label: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        mode: NotarizationMode = "batched",
        store: bool = False,
        filename: str | None = None,
        content_type: str = "application/octet-stream",
        idempotency_key: str | None = None,
    ) -> NotarizationSync:
        n = self._client.notarize_document(
            data,
            label=label,
            metadata=metadata,
            mode=mode,
            store=store,
            filename=filename,
            content_type=content_type,
            idempotency_key=idempotency_key,
        )
        return NotarizationSync(self._loop.run(n), self._loop)

    def notarize_hash(
        self,
        document_hash: HashLike,
        *,
        label: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        mode: NotarizationMode = "batched",
        idempotency_key: str | None = None,
    ) -> NotarizationSync:
        n = self._client.notarize_hash(
            document_hash,
            label=label,
            metadata=metadata,
            mode=mode,
            idempotency_key=idempotency_key,
        )
        return NotarizationSync(self._loop.run(n), self._loop)

    def notarize_hashes(
        self,
        items: Sequence[NotarizationItemLike],
        *,
        mode: NotarizationMode = "batched",
        idempotency_key: str | None = None,
    ) -> list[NotarizationSync]:
        bulk = self._loop.run(
            self._client.notarize_hashes(items, mode=mode, idempotency_key=idempotency_key)
        )
        return [NotarizationSync(n, self._loop) for n in bulk]

    def notarization(self, notarization_id: str) -> NotarizationSync:
        return NotarizationSync(
            self._loop.run(self._client.notarization(notarization_id)), self._loop
        )

    def verify_proof(
        self, proof: ProofLike, document: bytes | None = None, *, on_chain: bool = True
    ) -> VerificationResult:
        return self._loop.run(self._client.verify_proof(proof, document, on_chain=on_chain))

    def wallet(self, owner: SignerLike, salt: int = 0) -> SmartWalletSync:
        return SmartWalletSync(self._loop.run(self._client.wallet(owner, salt)), self._loop)

    def wallet_at(self, address: str, owner: SignerLike | None = None) -> SmartWalletSync:
        return SmartWalletSync(self._client.wallet_at(address, owner), self._loop)

    def eoa(self, owner: SignerLike) -> Eip7702AccountSync:
        return Eip7702AccountSync(self._client.eoa(owner), self._loop)

    def account(self, address: str, **kwargs: Any) -> ExistingAccountSync:
        """`Entryway.account`, blocking: the same keyword arguments."""
        return ExistingAccountSync(self._client.account(address, **kwargs), self._loop)

    def close(self) -> None:
        """Close the client and, for the wrapper that started it, the event loop."""
        if self._loop.loop.is_closed():
            return
        self._loop.run(self._client.aclose())
        if self._owns_loop:
            self._loop.close()

    def __enter__(self) -> EntrywaySync:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
