"""A plain EOA as a smart account, by EIP-7702: it delegates to the chain's Simple7702Account
and sends UserOperations from its own address through EntryPoint v0.8.

The first op carries the EOA's signed authorization (`eip7702Auth`): the bundler puts it in
its type-4 bundle transaction, so the delegation and the op land together. Later ops find the
delegation in place and carry none. Undoing it is a type-4 transaction of its own, with an
authorization to the zero address, sent by the EOA or by any funded account (a relayer)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from eth_account.typed_transactions.typed_transaction import TypedTransaction

from entryway_sdk._hex import ZERO_ADDRESS, checksum, quantity, to_hex
from entryway_sdk.calls import CallLike, as_calls, execute_call_data
from entryway_sdk.eip7702 import Authorization, delegate_of, sign_authorization
from entryway_sdk.errors import EntrywayError
from entryway_sdk.operations import ChainSession, PendingUserOperation, SendOptions, Speed
from entryway_sdk.signer import Signer, SignerLike, as_signer, dummy_signature, sign
from entryway_sdk.userop import UserOperation

SIMPLE_7702_ACCOUNT = "0xe6Cae83BdE06E4c305530e199D7217f42808555B"
# 21,000 for the transaction, 25,000 per authorization (EIP-7702), and room to spare.
_UNDELEGATE_GAS = 80_000


class Eip7702Account:
    """An EOA sending UserOperations from its own address, its code delegated to
    `implementation` (the chain's Simple7702Account). Get one with `client.eoa(owner)`.

    `send` makes one UserOperation, sponsored by default (ERC-7677, charged to the project's
    credits) or paid by the EOA's own EntryPoint deposit or balance. Send one op at a time and
    wait for it: the next op's nonce (and whether it still needs the authorization) is read
    from the chain."""

    def __init__(self, chain: ChainSession, owner: Signer, implementation: str) -> None:
        self._chain = chain
        self.owner = owner
        self.address = checksum(owner.address)
        self.implementation = checksum(implementation)

    def __repr__(self) -> str:
        return f"Eip7702Account({self.address}, chain_id={self.chain_id})"

    @property
    def chain_id(self) -> int:
        return self._chain.chain_id

    @property
    def entry_point(self) -> str:
        return self._chain.entry_point

    # ---------------------------------------------------------------- reads

    async def delegation(self) -> str | None:
        """The contract the EOA's code delegates to now, or None (a plain EOA)."""
        return delegate_of(await self._chain.node.get_code(self.address))

    async def is_delegated(self) -> bool:
        """Whether the EOA runs `implementation`'s code now."""
        return await self.delegation() == self.implementation

    async def nonce(self) -> int:
        """The EntryPoint nonce (key 0) the next op uses."""
        return await self._chain.nonce(self.address)

    async def transaction_count(self) -> int:
        """The EOA's account nonce (what an authorization must name)."""
        raw = await self._chain.node.request("eth_getTransactionCount", [self.address, "pending"])
        return quantity(raw, "eth_getTransactionCount")

    async def authorize(
        self, delegate: str | None = None, *, nonce: int | None = None
    ) -> Authorization:
        """The EOA's signed authorization to take `delegate`'s code (by default
        `implementation`; ZERO_ADDRESS clears the delegation) on this chain, at the account
        nonce the chain is at unless `nonce` is given."""
        nonce = await self.transaction_count() if nonce is None else nonce
        target = self.implementation if delegate is None else checksum(delegate)
        return await sign_authorization(self.owner, self.chain_id, target, nonce)

    # ---------------------------------------------------------------- sending

    async def send(
        self,
        calls: CallLike | Sequence[CallLike],
        *,
        sponsored: bool = True,
        policy_id: str | None = None,
        speed: Speed = "standard",
    ) -> PendingUserOperation:
        """Make one call or a batch (`Call`s or dicts {"to", "value"?, "data"?}) from the EOA's
        address in one UserOperation; the first one also delegates the EOA."""
        current = await self.delegation()
        if current is not None and current != self.implementation:
            raise EntrywayError(
                f"{self.address} delegates to {current}, not to {self.implementation}: "
                "undelegate it first, or use an account object for that code"
            )
        auth = None if current is not None else await self.authorize()
        draft = UserOperation(
            sender=self.address,
            nonce=await self.nonce(),
            call_data=execute_call_data(as_calls(calls)),
            eip7702_auth=auth,
        )
        # Simple7702Account recovers the EOA itself from the raw userOpHash.
        return await self._chain.submit(
            draft,
            partial(sign, self.owner),
            SendOptions(sponsored, policy_id, speed),
            stub_signature=dummy_signature(bytes(32)),
        )

    async def undelegate(
        self,
        relayer: SignerLike | None = None,
        *,
        timeout: float = 60.0,  # noqa: ASYNC109 - a deadline for polling, not for one await
    ) -> str:
        """Clear the EOA's delegation: a type-4 transaction carrying its authorization to the
        zero address, sent and paid for by `relayer` if given, else by the EOA itself (which
        then needs the gas). Waits for it to be mined; returns its hash. Raises EntrywayError
        if it reverts or is not mined within `timeout` seconds."""
        sender = self.owner if relayer is None else as_signer(relayer)
        node = self._chain.node
        tx_nonce = quantity(
            await node.request("eth_getTransactionCount", [sender.address, "pending"])
        )
        # A transaction's own nonce is spent before its authorizations apply: the EOA sending
        # its own authorizes the nonce after.
        auth_nonce = tx_nonce + 1 if checksum(sender.address) == self.address else None
        auth = await self.authorize(ZERO_ADDRESS, nonce=auth_nonce)
        priority = quantity(await node.request("eth_maxPriorityFeePerGas", []))
        base = quantity(await node.request("eth_gasPrice", []))
        tx: dict[str, Any] = {
            "type": 4,
            "chainId": self.chain_id,
            "nonce": tx_nonce,
            "maxPriorityFeePerGas": priority,
            "maxFeePerGas": 2 * base + priority,
            "gas": _UNDELEGATE_GAS,
            "to": self.address,
            "value": 0,
            "data": b"",
            "accessList": [],
            "authorizationList": [_authorization_fields(auth)],
        }
        signature = await sign(sender, TypedTransaction.from_dict(tx).hash())
        signed = TypedTransaction.from_dict(
            {
                **tx,
                "v": signature[64] - 27,
                "r": int.from_bytes(signature[:32], "big"),
                "s": int.from_bytes(signature[32:64], "big"),
            }
        )
        tx_hash = str(await node.request("eth_sendRawTransaction", [to_hex(signed.encode())]))
        await _mined(self._chain, tx_hash, timeout)
        return tx_hash


def _authorization_fields(auth: Authorization) -> dict[str, Any]:
    return {
        "chainId": auth.chain_id,
        "address": auth.delegate,
        "nonce": auth.nonce,
        "yParity": auth.y_parity,
        "r": auth.r,
        "s": auth.s,
    }


async def _mined(chain: ChainSession, tx_hash: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while (receipt := await chain.node.get_transaction_receipt(tx_hash)) is None:
        if time.monotonic() >= deadline:
            raise EntrywayError(f"transaction {tx_hash} was not mined within {seconds} s")
        await asyncio.sleep(0.5)
    if quantity(receipt.get("status") or 0) != 1:
        raise EntrywayError(f"transaction {tx_hash} reverted")
