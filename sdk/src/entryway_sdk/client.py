"""The SDK's client: one API key, one chain (its RPC URL and Entryway's defaults for it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, overload

import httpx

from entryway_sdk import abi
from entryway_sdk._hex import checksum
from entryway_sdk.anchor_verification import verify_with_node
from entryway_sdk.eoa import SIMPLE_7702_ACCOUNT, Eip7702Account
from entryway_sdk.errors import NetworkMismatchError
from entryway_sdk.existing_account import CallEncoder, ExistingAccount
from entryway_sdk.models import (
    AccountInfo,
    Credits,
    GasPrice,
    OpStatus,
    SdkDefaults,
    TaskStatus,
    UserOperationReceipt,
)
from entryway_sdk.notarization import (
    BulkNotarization,
    HashLike,
    Notarization,
    NotarizationItemLike,
    NotarizationMode,
    Notary,
)
from entryway_sdk.operations import ChainSession, PendingUserOperation, Speed
from entryway_sdk.options import EntrywayOptions
from entryway_sdk.proof import ProofLike, VerificationResult, verify_proof
from entryway_sdk.signer import SignerLike, UserOpHashSigner, as_signer
from entryway_sdk.transport import NodeRpc, RetryPolicy, ServiceApi
from entryway_sdk.userop import CANONICAL_ENTRY_POINTS, EntryPointVersion
from entryway_sdk.wallet import SmartWallet


class Entryway:
    """An Entryway client for one chain. Create it with
    `await Entryway.init(EntrywayOptions(...))` (or its fields as keywords), close it
    with `await client.aclose()` (or `async with`).

    Every REST error raises a typed `EntrywayError` (see `entryway_sdk.errors`)."""

    def __init__(self, chain: ChainSession, http: httpx.AsyncClient, *, owns_http: bool) -> None:
        self._chain = chain
        self._http = http
        self._owns_http = owns_http

    @overload
    @classmethod
    async def init(
        cls, options: EntrywayOptions, /, *, http: httpx.AsyncClient | None = None
    ) -> Entryway: ...

    @overload
    @classmethod
    async def init(
        cls,
        *,
        api_key: str,
        rpc_url: str,
        chain_id: int,
        base_url: str | None = None,
        request_timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> Entryway: ...

    @classmethod
    async def init(
        cls,
        options: EntrywayOptions | None = None,
        *,
        api_key: str | None = None,
        rpc_url: str | None = None,
        chain_id: int | None = None,
        base_url: str | None = None,
        request_timeout: float | None = None,
        retry: RetryPolicy | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> Entryway:
        """Connect to the service at `options.base_url` (else `ENTRYWAY_URL`) with the
        project's `api_key`, for `chain_id` through the caller's RPC endpoint `rpc_url`.
        Takes an `EntrywayOptions`, or its fields as keyword arguments.

        Raises ConfigurationError when no service URL is given either way. Checks that the
        RPC answers and serves `chain_id` (NetworkConnectionError, NetworkMismatchError),
        then loads the chain's defaults from `/get-sdk-defaults` (InvalidApiKeyError,
        ChainNotRecognisedError, PlanNetworkNotAllowedError, NetworkConnectionError).
        `http`, if given, is used and left open by `aclose`."""
        given = {
            "api_key": api_key,
            "rpc_url": rpc_url,
            "chain_id": chain_id,
            "base_url": base_url,
            "request_timeout": request_timeout,
            "retry": retry,
        }
        options = _options(options, {k: v for k, v in given.items() if v is not None})
        base_url = options.service_url()
        owns_http = http is None
        session = http if http is not None else httpx.AsyncClient(timeout=options.request_timeout)
        policy = options.retry or RetryPolicy()
        try:
            api = ServiceApi(session, base_url, options.api_key, policy)
            node = NodeRpc(session, options.rpc_url, policy)
            chain = await _connect(api, node, options.chain_id)
        except BaseException:
            if owns_http:
                await session.aclose()
            raise
        return cls(chain, session, owns_http=owns_http)

    # ---------------------------------------------------------------- chains

    @property
    def chain_id(self) -> int:
        return self._chain.chain_id

    @property
    def rpc_url(self) -> str:
        return self._chain.node.url

    @property
    def defaults(self) -> SdkDefaults:
        """Entryway's addresses and settings on this chain (`/get-sdk-defaults`)."""
        return self._chain.defaults

    @property
    def api(self) -> ServiceApi:
        return self._chain.api

    async def with_chain(self, chain_id: int, rpc_url: str) -> Entryway:
        """A client for another chain with the same key and connection pool (checked as
        `init` checks). Closing it leaves the pool open; closing this client closes both."""
        node = NodeRpc(self._http, rpc_url, self.api.retry)
        return Entryway(await _connect(self.api, node, chain_id), self._http, owns_http=False)

    async def switch_chain(self, chain_id: int, rpc_url: str) -> None:
        """Point this client at another chain (checked as `init` checks; on an error it stays
        where it was). Wallets made before stay on the chain they were made for."""
        node = NodeRpc(self._http, rpc_url, self.api.retry)
        self._chain = await _connect(self.api, node, chain_id)

    # ---------------------------------------------------------------- the service

    async def credits(self) -> Credits:
        """The project's credit balance and this cycle's use (`/v1/credits`)."""
        return Credits.parse(await self.api.get("/v1/credits"))

    async def op_status(self, user_op_hash: str) -> OpStatus:
        """A UserOperation this project sent on this chain (`/op-status`)."""
        raw = await self.api.get(
            "/op-status", {"chainId": self.chain_id, "userOpHash": user_op_hash}
        )
        return OpStatus.parse(raw, self.chain_id)

    async def account_info(self, address: str) -> AccountInfo:
        """Any account on this chain as the chain sees it (`/account-info`)."""
        raw = await self.api.get(
            "/account-info", {"chainId": self.chain_id, "address": checksum(address)}
        )
        return AccountInfo.parse(raw)

    async def task_status(self, task_id: str) -> TaskStatus:
        """A background task of this project (`/task-status`)."""
        return TaskStatus.parse(await self.api.get("/task-status", {"id": task_id}))

    async def rpc(self, method: str, params: list[Any] | None = None) -> Any:
        """One raw JSON-RPC call to this chain's bundler and paymaster endpoint."""
        return await self.api.rpc(self.chain_id, method, params or [])

    async def gas_price(self, speed: Speed = "standard") -> GasPrice:
        """The bundler's suggested fees for `speed` (slow, standard or fast)."""
        return await self._chain.gas_price(speed)

    def user_operation(self, user_op_hash: str) -> PendingUserOperation:
        """A handle on an op sent earlier (to wait for it or read its receipt)."""
        return PendingUserOperation(self.api, self.chain_id, user_op_hash)

    async def receipt(self, user_op_hash: str) -> UserOperationReceipt | None:
        return await self.user_operation(user_op_hash).receipt()

    # ---------------------------------------------------------------- wallets

    async def wallet(self, owner: SignerLike, salt: int = 0) -> SmartWallet:
        """The SmartAccount of `owner` and `salt` on this chain, at its counterfactual address
        (`AccountFactory.getAddress`, read through the RPC); its first op deploys it."""
        signer = as_signer(owner)
        factory = abi.load("AccountFactory")
        data = factory.encode_call("getAddress", checksum(signer.address), salt)
        raw = await self._chain.node.call(self.defaults.account_factory, data)
        address = checksum(factory.decode_output("getAddress", raw)[0])
        return SmartWallet(self._chain, address, signer, salt)

    def wallet_at(self, address: str, owner: SignerLike | None = None) -> SmartWallet:
        """A deployed account by its address, with its owner if known (a recovery needs no
        owner: the guardians' approvals authorise it)."""
        return SmartWallet(self._chain, address, None if owner is None else as_signer(owner))

    def eoa(self, owner: SignerLike) -> Eip7702Account:
        """The EOA of `owner` as a smart account by EIP-7702, sending ops from its own address
        through EntryPoint v0.8: delegated to the chain's Simple7702Account by its first op."""
        implementation = self.defaults.simple_7702_account or SIMPLE_7702_ACCOUNT
        return Eip7702Account(self._chain, as_signer(owner), implementation)

    def account(
        self,
        address: str,
        *,
        signer: UserOpHashSigner,
        entry_point: str | None = None,
        entry_point_version: EntryPointVersion | None = None,
        stub_signature: bytes | None = None,
        nonce_key: int = 0,
        encode_calls: CallEncoder | None = None,
    ) -> ExistingAccount:
        """A smart account you already have, deployed at `address`, relayed through its
        EntryPoint: `entry_point` if given, else the chain's EntryPoint of release
        `entry_point_version`, else v0.7's (the chain's, else the canonical address). The op's
        form (v0.6's unpacked one, or the packed RPC form) and its hash follow the release
        (the address says it, or `entry_point_version` for one at another address).

        `signer(user_op_hash) -> signature` (sync or async) signs as the account checks:
        `simple_account_signer(owner, version)` for the release's SimpleAccount
        (`personal_sign` for v0.6 and v0.7, `direct_sign` for v0.8 and v0.9).
        `stub_signature` is what the account's validation sees while the bundler estimates
        (by default a well-formed ECDSA signature, right for ECDSA accounts); `nonce_key` the
        EntryPoint nonce key; `encode_calls` turns calls into call data (by default the
        release's SimpleAccount's `execute` / `executeBatch`)."""
        chain = self._chain.at(
            entry_point or self._entry_point_of(entry_point_version or "0.7"), entry_point_version
        )
        return ExistingAccount(
            chain,
            address,
            signer,
            stub_signature=stub_signature,
            nonce_key=nonce_key,
            encode_calls=encode_calls,
        )

    def _entry_point_of(self, version: EntryPointVersion) -> str:
        """The chain's EntryPoint of `version` (`/get-sdk-defaults`), else the release's
        canonical address."""
        defaults = self.defaults
        chains: dict[EntryPointVersion, str | None] = {
            "0.6": defaults.entry_point_v06,
            "0.7": defaults.entry_point_v07,
            "0.8": defaults.entry_point if self._chain.entry_point_version == "0.8" else None,
            "0.9": defaults.entry_point_v09,
        }
        if version not in chains:
            raise ValueError(
                f"unsupported EntryPoint version {version!r} (supported: 0.6, 0.7, 0.8, 0.9)"
            )
        return chains[version] or CANONICAL_ENTRY_POINTS[version]

    # ---------------------------------------------------------------- notarization

    @property
    def _notary(self) -> Notary:
        return Notary(self.api, self.chain_id)

    async def notarize_document(
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
    ) -> Notarization:
        """Notarize a document on this chain (uploaded; the service keeps its SHA-256 and
        metadata, and the document itself only if `store`). `mode="direct"` anchors it at once
        in a tree of its own instead of waiting for the next batch."""
        return await self._notary.document(
            data,
            label=label,
            metadata=metadata,
            mode=mode,
            store=store,
            filename=filename,
            content_type=content_type,
            idempotency_key=idempotency_key,
        )

    async def notarize_hash(
        self,
        document_hash: HashLike,
        *,
        label: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        mode: NotarizationMode = "batched",
        idempotency_key: str | None = None,
    ) -> Notarization:
        """Notarize a document by its SHA-256 (32 bytes, or 64 hex digits with or without
        `0x`): the document never leaves the caller."""
        return await self._notary.hash(
            document_hash,
            label=label,
            metadata=metadata,
            mode=mode,
            idempotency_key=idempotency_key,
        )

    async def notarize_hashes(
        self,
        items: Sequence[NotarizationItemLike],
        *,
        mode: NotarizationMode = "batched",
        idempotency_key: str | None = None,
    ) -> BulkNotarization:
        """Notarize many hashes in one request (up to the service's limit, 1,000): each a
        hash, or a `NotarizationItem` / dict with its own label and metadata. A direct bulk
        request is one tree of its items."""
        return await self._notary.hashes(items, mode=mode, idempotency_key=idempotency_key)

    async def notarization(self, notarization_id: str) -> Notarization:
        """A handle on a notarization made earlier, by its id."""
        return await self._notary.get(notarization_id)

    async def verify_proof(
        self,
        proof: ProofLike,
        document: bytes | None = None,
        *,
        on_chain: bool = True,
        check_transaction: bool = True,
    ) -> VerificationResult:
        """Check a proof offline (form, `document` if given, path) and, with `on_chain`,
        its anchor through this client's RPC (a proof of another chain is then invalid:
        check it with `verify_proof_on_chain` and an RPC of its chain)."""
        if not on_chain:
            return verify_proof(proof, document)
        return await verify_with_node(
            proof, self._chain.node, document=document, check_transaction=check_transaction
        )

    # ---------------------------------------------------------------- lifetime

    async def aclose(self) -> None:
        """Close the connection pool if this client opened it."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> Entryway:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"Entryway(chain_id={self.chain_id}, base_url={self.api.base_url!r})"


async def _connect(api: ServiceApi, node: NodeRpc, chain_id: int) -> ChainSession:
    """`chain_id` through `node`, checked to serve it, with the service's defaults for it."""
    if not isinstance(chain_id, int) or isinstance(chain_id, bool) or chain_id <= 0:
        raise ValueError(f"chain_id must be a positive integer, not {chain_id!r}")
    actual = await node.chain_id()
    if actual != chain_id:
        raise NetworkMismatchError(node.url, chain_id, actual)
    defaults = SdkDefaults.parse(await api.get("/get-sdk-defaults", {"chainId": chain_id}))
    return ChainSession(api, node, defaults)


def _options(options: EntrywayOptions | None, settings: dict[str, Any]) -> EntrywayOptions:
    """The options `init` was given, one way or the other but not both."""
    if options is None:
        return EntrywayOptions(**settings)  # TypeError names a missing or unknown field
    if settings:
        raise TypeError(
            f"Entryway.init takes EntrywayOptions or keyword settings, not both: {sorted(settings)}"
        )
    return options
