"""One transaction manager per executor key: nonces, fees, replacement of stuck bundles,
detection of dropped ones."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

from eth_account.signers.local import LocalAccount

from entryway.chain.rpc import EthClient, RpcError, TxReceipt
from entryway.chain.transport import RpcTransportError
from entryway.domain.evm import checksum, to_hex
from entryway.errors import EntrywayError

log = logging.getLogger("entryway.bundler")
# A replacement must beat the pending transaction by 10% on both fees; bump a bit more.
FEE_BUMP_PERCENT = 15
# A key the node refused a transaction for want of funds is not picked for a bundle again
# for this long (other keys are); a refused replacement is tried again this long after.
UNFUNDED_REST_S = 2.0
REPLACE_RETRY_S = 1.0


class ExecutorUnfundedError(EntrywayError):
    """The node refused the bundle: its executor key cannot pay for the gas."""


class TransactionDroppedError(EntrywayError):
    """The nonce was consumed by none of this transaction's attempts."""


@dataclass(frozen=True, slots=True)
class Attempt:
    tx_hash: str
    max_fee_per_gas: int
    max_priority_fee_per_gas: int
    sent_at: float = 0.0  # wall-clock seconds, for the op's page


@dataclass(slots=True)
class PendingTransaction:
    nonce: int
    to: str
    data: bytes
    gas: int
    authorizations: list[dict[str, Any]] = field(default_factory=list)  # EIP-7702, if any
    attempts: list[Attempt] = field(default_factory=list)
    sent_block: int = 0
    sent_at: float = 0.0
    replace_at: float = 0.0  # monotonic: no replacement before (one was refused)
    at_ceiling_said: bool = False  # the log said its fees were bumped as far as they go

    @property
    def latest(self) -> Attempt:
        return self.attempts[-1]


@dataclass(frozen=True, slots=True)
class StuckPolicy:
    after_blocks: int = 3
    after_s: float = 30.0
    # A bundle younger than this is only looked for by receipt, not yet checked for being
    # dropped, lost or stuck (those checks cost more node calls per poll); nor is one while
    # no block has been mined since it was sent.
    quiet_s: float = 1.0
    # How many times a stuck bundle's fees are raised (15% each, compounding: 10 is about
    # 4x the first bid's priority fee). Past that it keeps its fees: each bump is paid by the
    # executor above what the ops pay back, and a fee spike must not drain the key.
    max_bumps: int = 10


class TransactionManager:
    def __init__(
        self,
        eth: EthClient,
        account: LocalAccount,
        chain_id: int,
        *,
        stuck: StuckPolicy = StuckPolicy(),
    ) -> None:
        self.eth = eth
        self.account = account
        self.chain_id = chain_id
        self.stuck = stuck
        self.pending: PendingTransaction | None = None
        # Taken by a bundler building a bundle for this key: the bundlers of a chain's
        # EntryPoints share its keys, one bundle in flight per key.
        self.reserved = False
        self.resting_until = 0.0  # monotonic: not picked before (it could not pay)
        self._unfunded = False  # said so in the log; said again once it pays

    @property
    def address(self) -> str:
        return str(self.account.address)

    @property
    def idle(self) -> bool:
        return self.pending is None and not self.reserved and time.monotonic() >= self.resting_until

    async def _nonce(self) -> int:
        # One bundle in flight per key, so the node's pending count is always the next nonce;
        # reading it each time also heals a reorg that dropped a mined bundle.
        return await self.eth.get_nonce(self.address, "pending")

    async def _broadcast(self, tx: PendingTransaction, max_fee: int, priority: int) -> None:
        raw: dict[str, Any] = {
            "type": 2,
            "chainId": self.chain_id,
            "nonce": tx.nonce,
            "to": checksum(tx.to),
            "value": 0,
            "data": to_hex(tx.data),
            "gas": tx.gas,
            "maxFeePerGas": max_fee,
            "maxPriorityFeePerGas": priority,
        }
        if tx.authorizations:
            raw["type"] = 4
            raw["authorizationList"] = tx.authorizations
        signed = self.account.sign_transaction(raw)
        try:
            tx_hash = await self.eth.send_raw_transaction(bytes(signed.raw_transaction))
        except RpcError as exc:
            if "insufficient funds" not in exc.message.lower():
                raise
            self.resting_until = time.monotonic() + UNFUNDED_REST_S
            if not self._unfunded:
                self._unfunded = True
                log.warning(
                    "executor %s cannot pay for its bundle (%s): its bundles wait, or go "
                    "with another key, until it is funded",
                    self.address,
                    exc.message,
                )
            raise ExecutorUnfundedError(f"executor {self.address}: {exc.message}") from exc
        if self._unfunded:
            self._unfunded = False
            log.info("executor %s pays for its bundles again", self.address)
        sent = Attempt(tx_hash, max_fee, priority, time.time())
        if tx.attempts and tx.attempts[-1].tx_hash == tx_hash:
            tx.attempts[-1] = sent  # the same transaction again (the node had lost it)
        else:
            tx.attempts.append(sent)
        tx.sent_block = await self.eth.block_number()
        tx.sent_at = time.monotonic()

    async def send(
        self,
        to: str,
        data: bytes,
        gas: int,
        max_fee: int,
        priority: int,
        *,
        authorizations: list[dict[str, Any]] | None = None,
    ) -> PendingTransaction:
        nonce = await self._nonce()
        tx = PendingTransaction(nonce, to, data, gas, list(authorizations or []))
        await self._broadcast(tx, max_fee, priority)
        self.pending = tx
        return tx

    async def poll(self, tx: PendingTransaction) -> TxReceipt | None:
        """The receipt once mined; sends it again when stuck or lost; raises if dropped."""
        for attempt in reversed(tx.attempts):
            receipt = await self.eth.get_receipt(attempt.tx_hash)
            if receipt is not None:
                self.pending = None
                return receipt
        if time.monotonic() - tx.sent_at < self.stuck.quiet_s:
            return None  # too early for the checks below; spare the node
        blocks = await self.eth.block_number() - tx.sent_block
        if blocks < 1:
            return None  # no block since it was sent: nothing to conclude yet
        mined_nonce = await self.eth.get_nonce(self.address, "latest")
        if mined_nonce > tx.nonce:
            # Our nonce is used, yet none of our attempts is mined: recheck once (a receipt
            # may have landed between the two reads), then call it dropped.
            for attempt in reversed(tx.attempts):
                receipt = await self.eth.get_receipt(attempt.tx_hash)
                if receipt is not None:
                    self.pending = None
                    return receipt
            self.pending = None
            raise TransactionDroppedError(
                f"nonce {tx.nonce} of {self.address} was used by another tx"
            )
        if time.monotonic() < tx.replace_at:
            return None  # a replacement was refused a moment ago
        waited = time.monotonic() - tx.sent_at
        stuck = blocks >= self.stuck.after_blocks or waited >= self.stuck.after_s
        # A block went by without it: a node that knows no attempt lost it (evicted from
        # its pool, or never passed on), and it is sent again now, not blocks later.
        if stuck or await self._lost(tx):
            await self.replace(tx)
        return None

    async def _lost(self, tx: PendingTransaction) -> bool:
        """Whether the node knows none of the transaction's attempts."""
        for attempt in reversed(tx.attempts):
            if await self.eth.rpc.request("eth_getTransactionByHash", [attempt.tx_hash]):
                return False
        log.info(
            "bundle %s of %s is unknown to the node: sending it again",
            tx.latest.tx_hash,
            self.address,
        )
        return True

    async def replace(self, tx: PendingTransaction) -> None:
        """Re-send with both fees raised, same nonce (a stuck bundle); once they were raised
        `max_bumps` times, only re-send what the node lost, at the same fees."""
        last = tx.latest
        if len(tx.attempts) > self.stuck.max_bumps:
            await self._at_ceiling(tx)
            return
        block = await self.eth.get_block("latest")
        base_fee = int(block.get("baseFeePerGas", "0x0"), 16)
        priority = last.max_priority_fee_per_gas * (100 + FEE_BUMP_PERCENT) // 100 + 1
        max_fee = max(
            last.max_fee_per_gas * (100 + FEE_BUMP_PERCENT) // 100 + 1, 2 * base_fee + priority
        )
        try:
            await self._broadcast(tx, max_fee, priority)
        except ExecutorUnfundedError:
            tx.replace_at = time.monotonic() + REPLACE_RETRY_S  # said once, in _broadcast
        except RpcError as exc:
            if "nonce" in exc.message.lower():
                return  # already mined or replaced: the next poll tells which
            # The bundle is followed still (the node may yet mine an earlier attempt).
            tx.replace_at = time.monotonic() + REPLACE_RETRY_S
            log.warning(
                "replacing bundle %s of %s refused (%s); trying again",
                last.tx_hash,
                self.address,
                exc.message,
            )

    async def _at_ceiling(self, tx: PendingTransaction) -> None:
        """A bundle whose fees go no higher: followed at the fees it has (said once), and sent
        again as it is if the node lost it."""
        last = tx.latest
        if not tx.at_ceiling_said:
            tx.at_ceiling_said = True
            log.warning(
                "bundle %s of %s: fees raised %d times, now %d wei max and %d wei priority; "
                "they stay there, and the bundle is followed until it is mined",
                last.tx_hash,
                self.address,
                len(tx.attempts) - 1,
                last.max_fee_per_gas,
                last.max_priority_fee_per_gas,
            )
        if not await self._lost(tx):
            # Looked at again a second later, not at every poll: it stays stuck, and no
            # replacement resets when it was sent.
            tx.replace_at = time.monotonic() + REPLACE_RETRY_S
            return
        try:
            await self._broadcast(tx, last.max_fee_per_gas, last.max_priority_fee_per_gas)
        except (ExecutorUnfundedError, RpcError):
            tx.replace_at = time.monotonic() + REPLACE_RETRY_S  # tried again a second later

    async def wait(
        self, tx: PendingTransaction, *, warn_after_s: float = 120.0, poll_s: float = 0.1
    ) -> TxReceipt:
        """The receipt once the bundle is mined; TransactionDroppedError once its nonce went
        to another transaction. There is no other end: while its nonce is open the key holds
        it (a key that gave up would leave the bundle in the node's pool, and the key busy
        for good), so a node that fails, or a bundle that stays unmined, is followed on,
        replaced as the stuck policy says, and said once at warning after `warn_after_s`."""
        warn_at = time.monotonic() + warn_after_s
        while True:
            try:
                receipt = await self.poll(tx)
            except (RpcError, RpcTransportError) as exc:
                # The node failing for a while (its client logs an outage once): the bundle
                # is followed all the same.
                log.debug("following bundle %s: %s", tx.latest.tx_hash, exc)
                receipt = None
            if receipt is not None:
                return receipt
            if time.monotonic() > warn_at:
                warn_at = math.inf
                log.warning(
                    "bundle %s of %s not mined after %.0f s; still following it",
                    tx.latest.tx_hash,
                    self.address,
                    warn_after_s,
                )
            await asyncio.sleep(poll_s)
