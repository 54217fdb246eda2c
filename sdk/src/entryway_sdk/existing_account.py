"""A smart account Entryway did not make, already deployed (a v0.7 SimpleAccount, a Safe with
its 4337 module, a Kernel, a LightAccount…): Entryway relays its UserOperations through the
EntryPoint it runs on, and the account's own signer callback authorises each one.

The SDK knows neither how the account encodes calls nor how it signs: `encode_calls` (by
default SimpleAccount's `execute` / `executeBatch`) and `signer` (the 32-byte userOpHash in,
the signature its `validateUserOp` accepts out) say it, or `send(call_data=...)` takes the
call data as it is."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from eth_abi.abi import encode

from entryway_sdk._hex import checksum, keccak
from entryway_sdk.calls import Call, CallLike, as_calls
from entryway_sdk.errors import EntrywayError
from entryway_sdk.operations import ChainSession, PendingUserOperation, SendOptions, Speed
from entryway_sdk.signer import UserOpHashSigner, dummy_signature
from entryway_sdk.userop import EntryPointVersion, UserOperation

CallEncoder = Callable[[Sequence[Call]], bytes]

_EXECUTE = keccak(b"execute(address,uint256,bytes)")[:4]
_EXECUTE_BATCH_V06 = keccak(b"executeBatch(address[],bytes[])")[:4]
_EXECUTE_BATCH_V07 = keccak(b"executeBatch(address[],uint256[],bytes[])")[:4]
_EXECUTE_BATCH_CALLS = keccak(b"executeBatch((address,uint256,bytes)[])")[:4]


def simple_account_call_data(calls: Sequence[Call], version: EntryPointVersion = "0.7") -> bytes:
    """The call data of release `version`'s SimpleAccount: `execute(dest, value, func)` for
    one call (every release); for more, `executeBatch` as the release declares it: v0.6's
    `(dest[], func[])` (no values), v0.7's `(dest[], value[], func[])` (LightAccount v2's
    too), v0.8's and v0.9's `(Call[])` of (target, value, data)."""
    if len(calls) == 1:
        (call,) = calls
        return _EXECUTE + encode(["address", "uint256", "bytes"], [call.to, call.value, call.data])
    targets, values, data = [c.to for c in calls], [c.value for c in calls], [c.data for c in calls]
    if version == "0.6":
        if any(values):
            raise ValueError(
                "v0.6's SimpleAccount batches calls without value: send a call carrying value "
                "in an op of its own"
            )
        return _EXECUTE_BATCH_V06 + encode(["address[]", "bytes[]"], [targets, data])
    if version == "0.7":
        return _EXECUTE_BATCH_V07 + encode(
            ["address[]", "uint256[]", "bytes[]"], [targets, values, data]
        )
    return _EXECUTE_BATCH_CALLS + encode(
        ["(address,uint256,bytes)[]"], [list(zip(targets, values, data, strict=True))]
    )


def simple_account_encoder(version: EntryPointVersion) -> CallEncoder:
    """`simple_account_call_data` for release `version`'s SimpleAccount, as an `encode_calls`."""

    def encode_calls(calls: Sequence[Call]) -> bytes:
        return simple_account_call_data(calls, version)

    return encode_calls


class ExistingAccount:
    """A deployed smart account on the client's chain, relayed through its EntryPoint (v0.6,
    v0.7, v0.8 or v0.9; v0.7 unless told otherwise). Get one with
    `client.account(address, signer=...)`.

    `send` makes one UserOperation, sponsored by default (ERC-7677, charged to the project's
    credits) or paid by the account's own deposit, and returns a `PendingUserOperation`.
    Send one op at a time and wait for it: the next op's nonce is read from the EntryPoint."""

    def __init__(
        self,
        chain: ChainSession,
        address: str,
        signer: UserOpHashSigner,
        *,
        stub_signature: bytes | None = None,
        nonce_key: int = 0,
        encode_calls: CallEncoder | None = None,
    ) -> None:
        if not callable(signer):
            raise TypeError(
                "signer is a callback from the 32-byte userOpHash to the account's signature"
            )
        self._chain = chain
        self.address = checksum(address)
        self.signer = signer
        # Estimation runs validateUserOp with this in place of the real signature: for the
        # ECDSA accounts, a well-formed signature by a key that owns nothing.
        self.stub_signature = (
            dummy_signature(bytes(32)) if stub_signature is None else stub_signature
        )
        self.nonce_key = nonce_key
        self.encode_calls = encode_calls or simple_account_encoder(chain.entry_point_version)

    def __repr__(self) -> str:
        return (
            f"ExistingAccount({self.address}, chain_id={self.chain_id}, "
            f"entry_point={self.entry_point})"
        )

    @property
    def chain_id(self) -> int:
        return self._chain.chain_id

    @property
    def entry_point(self) -> str:
        return self._chain.entry_point

    @property
    def entry_point_version(self) -> EntryPointVersion:
        """The EntryPoint's release: it sets the op's form and hash."""
        return self._chain.entry_point_version

    def user_op_hash(self, op: UserOperation) -> bytes:
        """The hash the account's EntryPoint computes for `op` (what `signer` is given)."""
        return self._chain.hash(op)

    async def is_deployed(self) -> bool:
        return bool(await self._chain.node.get_code(self.address))

    async def nonce(self) -> int:
        """The EntryPoint nonce the next op uses (under `nonce_key`)."""
        return await self._chain.nonce(self.address, self.nonce_key)

    async def send(
        self,
        calls: CallLike | Sequence[CallLike] | None = None,
        *,
        call_data: bytes | None = None,
        sponsored: bool = True,
        policy_id: str | None = None,
        speed: Speed = "standard",
    ) -> PendingUserOperation:
        """One UserOperation making `calls` (`Call`s or dicts {"to", "value"?, "data"?},
        encoded by `encode_calls`) or carrying `call_data` as it is; signed by `signer`."""
        if (calls is None) == (call_data is None):
            raise ValueError("give either calls or call_data")
        data = call_data if call_data is not None else self.encode_calls(as_calls(calls or []))
        if not await self.is_deployed():
            raise EntrywayError(
                f"no account is deployed at {self.address} on chain {self.chain_id}: "
                "an existing account is relayed for, not deployed"
            )
        draft = UserOperation(sender=self.address, nonce=await self.nonce(), call_data=data)
        return await self._chain.submit(
            draft,
            self.signer,
            SendOptions(sponsored, policy_id, speed),
            stub_signature=self.stub_signature,
        )
