"""A smart wallet: Entryway's SmartAccount at its counterfactual address, deployed by its
first UserOperation, with guardians and timelocked social recovery."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, Unpack

from entryway_sdk import abi
from entryway_sdk._hex import checksum
from entryway_sdk.calls import CallLike, as_calls, execute_call_data, self_call_data
from entryway_sdk.errors import EntrywayError, SignerRequiredError
from entryway_sdk.models import AccountInfo
from entryway_sdk.operations import (
    ChainSession,
    PendingUserOperation,
    SendKwargs,
    SendOptions,
    Speed,
)
from entryway_sdk.recovery import RecoveryApproval, ordered_signatures, sign_recovery_approval
from entryway_sdk.signer import Signer, SignerLike, as_signer, dummy_signature, sign
from entryway_sdk.userop import UserOperation


class SmartWallet:
    """One SmartAccount on the client's chain. Get one with `await client.wallet(owner)`
    (counterfactual, from the owner and a salt) or `client.wallet_at(address)`.

    Every method that changes the account sends one UserOperation, sponsored by default,
    and returns a `PendingUserOperation`; `await op.wait()` gives its receipt. Send one op
    at a time per wallet and wait for it: the next op's nonce is read from the chain."""

    def __init__(
        self,
        chain: ChainSession,
        address: str,
        owner: Signer | None,
        salt: int | None = None,
    ) -> None:
        self._chain = chain
        self.address = checksum(address)
        self.owner = owner
        self.salt = salt  # known for wallets made from their owner; then the first op deploys

    def __repr__(self) -> str:
        return f"SmartWallet({self.address}, chain_id={self.chain_id})"

    @property
    def chain_id(self) -> int:
        return self._chain.chain_id

    def with_owner(self, owner: SignerLike) -> SmartWallet:
        """This (deployed) account signed by another key, after a recovery handed it to
        `owner`. Its deployment, by the first owner and salt, is not for the new key to do."""
        return SmartWallet(self._chain, self.address, as_signer(owner))

    # ---------------------------------------------------------------- reads

    async def is_deployed(self) -> bool:
        return bool(await self._chain.node.get_code(self.address))

    async def nonce(self) -> int:
        """The EntryPoint nonce (key 0) the next op uses."""
        return await self._chain.nonce(self.address)

    async def info(self) -> AccountInfo:
        """The service's view: owner, guardians, threshold, pending recovery (`/account-info`)."""
        raw = await self._chain.api.get(
            "/account-info", {"chainId": self.chain_id, "address": self.address}
        )
        return AccountInfo.parse(raw)

    async def _read(self, fn: str, *args: Any) -> Any:
        account = abi.load("SmartAccount")
        if not await self.is_deployed():
            raise EntrywayError(f"the account {self.address} is not deployed yet")
        raw = await self._chain.node.call(self.address, account.encode_call(fn, *args))
        out = account.decode_output(fn, raw)
        return out[0] if len(out) == 1 else out

    async def recovery_nonce(self) -> int:
        return int(await self._read("recoveryNonce"))

    # ---------------------------------------------------------------- sending

    async def _draft(self, call_data: bytes) -> UserOperation:
        deployed = await self.is_deployed()
        if not deployed and (self.owner is None or self.salt is None):
            raise EntrywayError(
                f"{self.address} is not deployed and this wallet does not know the owner and "
                "salt that deploy it: use `await client.wallet(owner, salt)`"
            )
        factory, factory_data = None, b""
        if not deployed:
            assert self.owner is not None and self.salt is not None
            factory = self._chain.defaults.account_factory
            factory_data = abi.load("AccountFactory").encode_call(
                "createAccount", self.owner.address, self.salt
            )
        return UserOperation(
            sender=self.address,
            nonce=await self.nonce(),
            call_data=call_data,
            factory=factory,
            factory_data=factory_data,
        )

    async def _submit(
        self, call_data: bytes, options: SendOptions, *, owner_signs: bool = True
    ) -> PendingUserOperation:
        if not owner_signs:
            # Authorised by its call data (guardians' approvals, a due recovery): no signature.
            draft = await self._draft(call_data)
            return await self._chain.submit(draft, None, options)
        if self.owner is None:
            raise SignerRequiredError(
                f"this op must be signed by the owner of {self.address}: "
                "give the wallet its owner (`wallet.with_owner(owner)`)"
            )
        draft = await self._draft(call_data)
        # The SmartAccount recovers the owner from the raw userOpHash; estimation runs that
        # ECDSA path with a stand-in signature.
        return await self._chain.submit(
            draft,
            partial(sign, self.owner),
            options,
            stub_signature=dummy_signature(bytes(32)),
        )

    async def send(
        self,
        calls: CallLike | Sequence[CallLike],
        *,
        sponsored: bool = True,
        policy_id: str | None = None,
        speed: Speed = "standard",
    ) -> PendingUserOperation:
        """Make one call or a batch (`Call`s or dicts {"to", "value"?, "data"?}) in one
        UserOperation signed by the owner; the first one also deploys the account."""
        options = SendOptions(sponsored, policy_id, speed)
        return await self._submit(execute_call_data(as_calls(calls)), options)

    async def deploy(
        self, *, sponsored: bool = True, policy_id: str | None = None, speed: Speed = "standard"
    ) -> PendingUserOperation:
        """Deploy the account with an op that calls nothing."""
        return await self._submit(b"", SendOptions(sponsored, policy_id, speed))

    async def _manage(
        self, fn: str, *args: Any, **options: Unpack[SendKwargs]
    ) -> PendingUserOperation:
        return await self._submit(self_call_data(self.address, fn, *args), SendOptions(**options))

    # ---------------------------------------------------------------- guardians

    async def add_guardian(
        self, guardian: str, **options: Unpack[SendKwargs]
    ) -> PendingUserOperation:
        """Add a guardian (the first one sets the threshold to 1). Options as for `send`."""
        return await self._manage("addGuardian", checksum(guardian), **options)

    async def remove_guardian(
        self, guardian: str, **options: Unpack[SendKwargs]
    ) -> PendingUserOperation:
        """Remove a guardian (the threshold drops to the guardians left, if above)."""
        return await self._manage("removeGuardian", checksum(guardian), **options)

    async def set_guardian_threshold(
        self, threshold: int, **options: Unpack[SendKwargs]
    ) -> PendingUserOperation:
        """How many guardians' approvals a recovery needs (1 … the number of guardians)."""
        return await self._manage("setGuardianThreshold", threshold, **options)

    async def set_recovery_delay(
        self, seconds: int, **options: Unpack[SendKwargs]
    ) -> PendingUserOperation:
        """The timelock between starting and finalizing a recovery (at least one hour)."""
        return await self._manage("setRecoveryDelay", seconds, **options)

    # ---------------------------------------------------------------- recovery

    async def recovery_approval(self, guardian: SignerLike, new_owner: str) -> RecoveryApproval:
        """`guardian`'s signed approval to hand this account to `new_owner`, under the
        account's current recovery nonce (read from the chain)."""
        nonce = await self.recovery_nonce()
        return await sign_recovery_approval(guardian, self.address, new_owner, nonce, self.chain_id)

    async def start_recovery(
        self, new_owner: str, approvals: Sequence[RecoveryApproval], **options: Unpack[SendKwargs]
    ) -> PendingUserOperation:
        """Start a recovery to `new_owner` with at least the threshold of guardians'
        approvals. No owner signature: the approvals in the call data authorise it."""
        signatures = ordered_signatures(approvals, self.address, new_owner, self.chain_id)
        call = abi.load("SmartAccount").encode_call(
            "startRecovery", checksum(new_owner), signatures
        )
        return await self._submit(call, SendOptions(**options), owner_signs=False)

    async def finalize_recovery(self, **options: Unpack[SendKwargs]) -> PendingUserOperation:
        """Hand the account to the pending recovery's new owner once its delay has passed;
        anyone may send it. Before, it fails at estimation: UserOperationRejectedError whose
        `account_error` is ("RecoveryNotDue", (execute_after,))."""
        call = abi.load("SmartAccount").encode_call("finalizeRecovery")
        return await self._submit(call, SendOptions(**options), owner_signs=False)

    async def cancel_recovery(self, **options: Unpack[SendKwargs]) -> PendingUserOperation:
        """The owner cancels a pending recovery; its approvals become void."""
        return await self._manage("cancelRecovery", **options)
