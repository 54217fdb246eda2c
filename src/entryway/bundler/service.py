"""The bundler's use cases: accept ops, bundle them, answer for them. Sending bundles is
bundle_sender.py's part, deciding when in auto mode auto.py's."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from entryway import contracts
from entryway.bundler.auto import AutoBundler
from entryway.bundler.bundle_sender import BundleSender
from entryway.bundler.bundling import BundleLimits
from entryway.bundler.counts import BundlerCounts
from entryway.bundler.errors import BundlerError, RpcErrorCode, invalid_params
from entryway.bundler.gas.l1fee import L1FeeQuoter
from entryway.bundler.gas.pvg import minimum_pre_verification_gas, pre_verification_gas
from entryway.bundler.head import ChainHead
from entryway.bundler.mempool import Mempool, MempoolEntry, MempoolLimits
from entryway.bundler.op_codec import codec_for
from entryway.bundler.receipts import ReceiptReader
from entryway.bundler.reorged import ReorgedOps
from entryway.bundler.reputation import Reputation, ReputationStatus
from entryway.bundler.states import MINED, BundlingMode, OpStatus, Tracked
from entryway.bundler.submission import TransactionManager
from entryway.bundler.tracking import TrackedOps, TrackingLimits
from entryway.bundler.validation.outcome import ValidationData, ValidationOutcome
from entryway.bundler.validation.rules import RuleSettings, StakeInfo
from entryway.bundler.validation.sanity import SanityLimits, check_sanity
from entryway.bundler.validation.simulation import (
    Validator,
)
from entryway.chain.rpc import EthClient
from entryway.domain.eip7702 import delegate_of
from entryway.domain.entry_points import (
    EntryPointRelease,
    EntryPointVersion,
    release,
    release_at,
    version_at,
)
from entryway.domain.paymaster_signature import paymaster_signature_length
from entryway.domain.userop import UserOperation, user_op_hash

log = logging.getLogger("entryway.bundler")
HEAD_TTL_S = 0.1  # how stale a head read a newly sent op may be judged against
EP = contracts.load("EntryPoint").abi
# Runs once an op passed validation, before it enters the mempool: raising keeps it out.
BeforeMempool = Callable[[UserOperation, bytes], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class BundlerConfig:
    entry_point: str
    chain_id: int
    beneficiary: str | None = None
    mode: BundlingMode = BundlingMode.AUTO
    auto_bundle_interval_s: float = 1.0  # between bundles where blocks come irregularly
    head_poll_s: float = 0.1  # how often the latest block number is read (auto mode)
    rules: RuleSettings = field(default_factory=lambda: RuleSettings(min_stake_wei=10**18))
    sanity: SanityLimits = field(default_factory=SanityLimits)
    mempool: MempoolLimits = field(default_factory=MempoolLimits)
    bundle: BundleLimits = field(default_factory=BundleLimits)
    # Factories, paymasters and aggregators reputation never throttles (reputation.py).
    trusted_entities: tuple[str, ...] = ()
    receipt_lookback_blocks: int = 10_000
    tracking: TrackingLimits = field(default_factory=TrackingLimits)  # what became of ops
    min_priority_fee_per_gas: int = 0
    l1_fee_oracle: str | None = None  # OP-stack GasPriceOracle, on chains that post to L1

    @property
    def release(self) -> EntryPointRelease:
        """The EntryPoint release served (its canonical address says which; else v0.8)."""
        return release_at(self.entry_point) or release(version_at(self.entry_point))


class Bundler:
    intake_only = False  # validates and hands ops on, never bundles (bundler.intake)

    def __init__(
        self,
        eth: EthClient,
        executors: list[TransactionManager],
        validator: Validator,
        config: BundlerConfig,
    ) -> None:
        if not executors and not self.intake_only:
            raise ValueError("a bundler needs at least one executor key")
        self.eth = eth
        self.executors = executors
        self.validator = validator
        self.config = config
        self.codec = codec_for(config.entry_point)  # the release's op shapes
        self.mode = config.mode
        self.reputation = Reputation(trusted=config.trusted_entities)
        self.mempool = Mempool(self.reputation, config.mempool)
        self.receipts = ReceiptReader(
            eth, config.entry_point, config.chain_id, config.receipt_lookback_blocks
        )
        # Bounded: final ops are forgotten once old; the chain's logs still answer for them.
        self.tracked = TrackedOps(config.tracking)
        self.counts = BundlerCounts()  # read by the service's metrics
        self.l1_fees = L1FeeQuoter(eth, config.l1_fee_oracle) if config.l1_fee_oracle else None
        self._tasks: list[asyncio.Task[None]] = []
        # One admission at a time per sender while its caller accounts for the op.
        self._admitting: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self.head = ChainHead(eth)
        self.sender = BundleSender(self)
        self.reorged = ReorgedOps(self)
        self.auto = AutoBundler(self)

    @property
    def beneficiary(self) -> str:
        return self.config.beneficiary or self.executors[0].address

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self.auto.bundler is self:  # not when another EntryPoint's bundler sends for it
            self._tasks.append(asyncio.create_task(self.auto.bundle_loop(), name="auto-bundle"))
            self._tasks.append(asyncio.create_task(self.auto.watch_head_loop(), name="head-watch"))
        self._tasks.append(asyncio.create_task(self._decay_loop(), name="reputation-decay"))

    async def stop(self) -> None:
        self._tasks.extend(self.sender.following)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    # ------------------------------------------------------------------ accepting ops

    def check_supported(self, op: UserOperation) -> None:
        """An op this EntryPoint release can carry: v0.7 has no EIP-7702 senders; v0.9 rejects
        a paymaster signature suffix that claims more bytes than paymasterAndData has."""
        uses_7702 = op.is_eip7702 or op.eip7702_auth is not None
        if uses_7702 and not self.config.release.supports_eip7702:
            raise invalid_params(
                f"EntryPoint v{self.config.release.version} does not support EIP-7702 senders "
                "(factory 0x7702, eip7702Auth)"
            )
        if self.config.release.version is EntryPointVersion.V09:
            try:
                paymaster_signature_length(op.paymaster_and_data)
            except ValueError as exc:
                raise invalid_params(str(exc)) from None

    async def op_hash(self, op: UserOperation) -> bytes:
        self.check_supported(op)
        delegate = None
        if op.is_eip7702:
            if op.eip7702_auth is not None:
                delegate = op.eip7702_auth.address
            else:
                delegate = delegate_of(await self.eth.get_code(op.sender))
            if delegate is None:
                raise BundlerError(
                    RpcErrorCode.REJECTED_BY_EP_OR_ACCOUNT,
                    f"sender {op.sender} is not an EIP-7702 account and brings no authorization",
                )
        return user_op_hash(
            op,
            self.config.entry_point,
            self.config.chain_id,
            delegate=delegate,
            version=self.config.release.version,
        )

    async def _check_authorization(self, op: UserOperation) -> None:
        """An EIP-7702 authorization must be the sender's own, for this chain (or any chain),
        at the sender's current nonce, or the bundle would carry it in vain."""
        auth = op.eip7702_auth
        if auth is None:
            return
        if auth.chain_id not in (0, self.config.chain_id):
            raise invalid_params(
                f"eip7702Auth chainId {auth.chain_id} is neither 0 nor {self.config.chain_id}"
            )
        try:
            signer = auth.signer()
        except Exception:
            raise invalid_params("eip7702Auth: the signature does not recover") from None
        if signer != op.sender:
            raise invalid_params(
                f"eip7702Auth is signed by {signer}, not by the sender {op.sender}"
            )
        nonce = await self.eth.get_nonce(op.sender, "pending")
        if auth.nonce != nonce:
            raise BundlerError(
                RpcErrorCode.REJECTED_BY_EP_OR_ACCOUNT,
                f"eip7702Auth nonce {auth.nonce} is not the sender's nonce {nonce}",
            )

    async def send(
        self,
        op: UserOperation,
        *,
        before_mempool: BeforeMempool | None = None,
        on_pending: bool = False,
    ) -> bytes:
        """Validate `op` and add it to the mempool; its hash. `before_mempool` (the service
        recording what the op costs) runs between the two: when it raises, the op is not
        added, so no op is bundled that its caller failed to account for. `on_pending`:
        simulate on the pending block alone, for an op that a bundle the node holds may
        carry already (an op a previous leader had loaded)."""
        await self._check_authorization(op)
        op_hash = await self.op_hash(op)
        # A process that only accepts ops keeps the head fresh itself (`bundler.head`).
        block_number, now, base_fee = await self.head.now(
            max_age_s=HEAD_TTL_S, keep_fresh=self.intake_only
        )
        self._reject_banned(op)
        if self.mode is BundlingMode.MANUAL:
            base_fee = 0
        elif op.max_fee_per_gas < base_fee:
            # Under the base fee of a head read up to HEAD_TTL_S ago: judged again by the head
            # as it is now (the base fee may have fallen with a block since).
            block_number, now, base_fee = await self.head.now()
        check_sanity(op, base_fee=base_fee, limits=self.config.sanity)
        floor = minimum_pre_verification_gas(op)
        if op.pre_verification_gas < floor:
            raise invalid_params(
                f"preVerificationGas {op.pre_verification_gas} is below the {floor} required"
            )
        self._check_mempool_rules(op)  # cheap, before the costly simulation
        validator = self.validator.on_pending() if on_pending else self.validator
        outcome = await validator.validate(
            op, now=now, block=block_number, op_hash=op_hash, check=False
        )
        try:
            self.validator.check(outcome, now, block_number)
        except BundlerError as exc:
            if exc.code is not RpcErrorCode.SHORT_DEADLINE:
                raise
            # Out of its validity window by a head read up to HEAD_TTL_S ago: judged again by
            # the head as it is now before it is refused (a block at the window's edge, or a
            # development chain whose clock was moved meanwhile).
            block_number, now, _ = await self.head.now()
            self.validator.check(outcome, now, block_number)
        required = pre_verification_gas(op, outcome.pre_op_gas - op.pre_verification_gas)
        if self.l1_fees is not None:
            required += await self.l1_fees.gas(op)
        if op.pre_verification_gas < required:
            raise invalid_params(
                f"preVerificationGas {op.pre_verification_gas} is below the {required} required"
            )
        await self._enter(self._entry(op, op_hash, outcome, block_number), before_mempool)
        return op_hash

    async def admit_validated(
        self, op: UserOperation, outcome: ValidationOutcome, validated_block: int
    ) -> bytes:
        """Add to the mempool an op another replica validated (`send`) at `validated_block`,
        recently, with `outcome`: every mempool rule applies (bans, replacement, entity
        limits, the paymaster's deposit), but it is not simulated again. Its hash.

        Bundling still protects the executor: each op of a bundle is simulated again and its
        contracts' code compared (COD-010) before the bundle is eth_called and sent."""
        op_hash = await self.op_hash(op)
        self._reject_banned(op)
        self._check_mempool_rules(op)
        await self._enter(self._entry(op, op_hash, outcome, validated_block), None)
        return op_hash

    def _check_mempool_rules(self, op: UserOperation) -> None:
        """A replacement's fee bump, and the entity limits (ERC-7562) for the op's roles."""
        same_nonce = next(
            (e for e in self.mempool.for_sender(op.sender) if e.op.nonce == op.nonce), None
        )
        if same_nonce is not None:
            self.mempool.check_replacement(same_nonce.op, op)
        self.mempool.check_roles(op, same_nonce)

    async def _enter(self, entry: MempoolEntry, before_mempool: BeforeMempool | None) -> None:
        """The validated op's last checks (the paymaster's deposit), then the mempool."""
        await self._check_paymaster_deposit(entry)
        await self._admit(entry, before_mempool)

    async def _admit(self, entry: MempoolEntry, before_mempool: BeforeMempool | None) -> None:
        """Take a validated op into the mempool (accounted first, with `before_mempool`)."""
        if before_mempool is None:
            replaced = self.mempool.add(entry)
        else:
            replaced = await self._admit_accounted(entry, before_mempool)
        if replaced is not None:
            self.tracked.pop(replaced.user_op_hash, None)
            self._forget_seen(replaced)
        self._count_seen(entry)
        self.tracked[entry.user_op_hash] = Tracked(OpStatus.PENDING)
        self.auto.op_arrived()
        if self._full_bundle_waits():
            self.auto.wake.set()

    def _full_bundle_waits(self) -> bool:
        """A bundle's worth of ops waits: as many as one may carry, or the gas of its share
        of the block (auto mode then sends at once rather than at the block's turn)."""
        limits = self.config.bundle
        if len(self.mempool) >= limits.max_ops:
            return True
        budget = limits.gas_budget(self.head.gas_limit)
        return budget > 0 and sum(e.max_gas for e in self.mempool.entries()) >= budget

    async def _admit_accounted(
        self, entry: MempoolEntry, before_mempool: BeforeMempool
    ) -> MempoolEntry | None:
        """Check the mempool would take the op, let the caller account for it, then add it.
        A refusal comes before the accounting, so a refused op is never charged; the sender's
        lock keeps another op of the same sender (a replacement, a retry) from slipping in
        between the check and the add while the caller writes."""
        lock = self._admitting.get(entry.op.sender)
        if lock is None:
            lock = self._admitting[entry.op.sender] = asyncio.Lock()
        async with lock:
            self.mempool.check_admission(entry)
            await before_mempool(entry.op, entry.user_op_hash)
            return self.mempool.add(entry)

    def _entry(
        self, op: UserOperation, op_hash: bytes, outcome: ValidationOutcome, block: int
    ) -> MempoolEntry:
        staked = self.config.rules.is_staked
        return MempoolEntry(
            op=op,
            user_op_hash=op_hash,
            outcome=outcome,
            sender_staked=staked(outcome.sender_stake),
            factory_staked=staked(outcome.factory_stake),
            paymaster_staked=staked(outcome.paymaster_stake),
            received_at=time.time(),
            received_block=block,
        )

    def _count_seen(self, entry: MempoolEntry) -> None:
        for address in entry.accountable():
            self.reputation.seen(address)

    def _forget_seen(self, entry: MempoolEntry) -> None:
        for address in entry.accountable():
            self.reputation.unseen(address)

    async def _check_paymaster_deposit(self, entry: MempoolEntry) -> None:
        """EREP-010: the paymaster's deposit must cover all its pending ops at their max cost."""
        paymaster = entry.op.paymaster
        if paymaster is None:
            return
        deposit = (await self._deposits({paymaster}))[paymaster]
        same_nonce = next(
            (e for e in self.mempool.for_sender(entry.op.sender) if e.op.nonce == entry.op.nonce),
            None,
        )
        needed = self.mempool.committed_cost(paymaster, same_nonce) + entry.max_cost
        if needed > deposit:
            raise BundlerError(
                RpcErrorCode.PAYMASTER_DEPOSIT_TOO_LOW,
                f"paymaster deposit too low: {deposit} wei for {needed} wei of pending ops",
            )

    def _reject_banned(self, op: UserOperation) -> None:
        for role, address in (
            ("sender", op.sender),
            ("factory", op.factory),
            ("paymaster", op.paymaster),
        ):
            if address is not None and self.reputation.status(address) is ReputationStatus.BANNED:
                raise BundlerError(RpcErrorCode.BANNED_OR_THROTTLED, f"{role} {address} is banned")

    async def add_unchecked(self, op: UserOperation) -> bytes:
        """debug_bundler_addUserOps: into the mempool without validation."""
        op_hash = await self.op_hash(op)
        block_number, _, _ = await self.head.now()
        blank = ValidationOutcome(
            0, 0, ValidationData.unpack(0), ValidationData.unpack(0), b"",
            StakeInfo(0, 0), StakeInfo(0, 0), StakeInfo(0, 0),
        )  # fmt: skip
        self.mempool.add(self._entry(op, op_hash, blank, block_number))
        self.tracked[op_hash] = Tracked(OpStatus.PENDING)
        return op_hash

    # ------------------------------------------------------------------ bundling

    async def _decay_loop(self) -> None:
        while True:
            await asyncio.sleep(3600)
            self.reputation.decay()

    async def bundle_once(self, *, wait: bool) -> str | None:
        """Build, check and send one bundle; with `wait`, return once it is mined."""
        return await self.sender.bundle_once(wait=wait)

    async def fill_block(self) -> str | None:
        """Auto mode: bundles with as many idle executors as the ready ops and the block's
        gas call for; the first one's transaction hash."""
        return await self.sender.fill_block()

    async def _deposits(self, paymasters: set[str]) -> dict[str, int]:
        deposits = {}
        for pm in paymasters:
            raw = await self.eth.call(self.config.entry_point, EP.encode_call("balanceOf", pm))
            deposits[pm] = int(EP.decode_output("balanceOf", raw)[0])
        return deposits

    # ------------------------------------------------------------------ queries

    def one_answer(self) -> contextlib.AbstractContextManager[None]:
        """Around one answer about an op that asks this bundler (and its chain's others)
        several questions: what they read of the op is read once (`IntakeBundler`)."""
        return contextlib.nullcontext()

    async def unmined(self, op_hash: bytes) -> bool:
        """Whether the op is known not to be mined yet (pending or submitted by our own
        account): a receipt poll for it then needs no node call."""
        tracked = self.tracked.get(op_hash)
        return tracked is not None and tracked.status in (OpStatus.PENDING, OpStatus.SUBMITTED)

    async def bundle_of(self, op_hash: bytes) -> str | None:
        """The transaction this bundler sent the op in, by its own account, if any."""
        tracked = self.tracked.get(op_hash)
        return None if tracked is None else tracked.tx_hash

    async def receipt(self, op_hash: bytes, *, l1_fee: bool = True) -> dict[str, Any] | None:
        """The op's receipt (with its `l1Fee` on OP-stack chains, unless not `l1_fee`), None
        while it is not mined. An op this bundler saw mined is read off its bundle."""
        l1_fees = self.l1_fees if l1_fee else None
        tracked = self.tracked.get(op_hash)
        if tracked is not None and tracked.status in MINED and tracked.tx_hash:
            return await self.receipts.of_bundle(op_hash, tracked.tx_hash, l1_fees)
        return await self.receipts.receipt(op_hash, l1_fees)

    async def status(self, op_hash: bytes) -> dict[str, Any]:
        tracked = self.tracked.get(op_hash)
        # Pending or submitted by our own account: its bundle's follower marks it the moment
        # the receipt appears, so the node need not be asked (clients poll this hard).
        in_flight = tracked is not None and tracked.status in (
            OpStatus.PENDING,
            OpStatus.SUBMITTED,
        )
        receipt = None if in_flight else await self.receipt(op_hash, l1_fee=False)
        if receipt is not None:
            status = OpStatus.INCLUDED if receipt["success"] else OpStatus.FAILED
            found: dict[str, Any] = {
                "status": status.value,
                "transactionHash": receipt["receipt"]["transactionHash"],
                "confirmations": receipt["confirmations"],
            }
            if "final" in receipt:
                found["final"] = receipt["final"]
            return found
        if tracked is None:
            return {"status": OpStatus.NOT_FOUND.value}
        if tracked.status in MINED:
            # We saw it mined and its event is gone: a reorg took its block.
            tracked = await self.reinclude(op_hash) or tracked
        out: dict[str, Any] = {"status": tracked.status.value}
        if tracked.tx_hash:
            out["transactionHash"] = tracked.tx_hash
        if tracked.reason:
            out["reason"] = tracked.reason
        return out

    async def blocks_removed(self, block_numbers: Collection[int]) -> None:
        """A reorg removed these blocks (the chain's follower says so): the ops this bundler
        had mined in them go back to the mempool, or are dropped (`bundler.reorged`)."""
        await self.reorged.blocks_removed(block_numbers)

    async def reinclude(self, op_hash: bytes) -> Tracked | None:
        """The op this bundler saw mined whose block left the chain (`bundler.reorged`)."""
        return await self.reorged.reinclude(op_hash)

    async def pending_op(self, op_hash: bytes) -> UserOperation | None:
        """The op while it waits to be bundled (eth_getUserOperationByHash before its receipt)."""
        entry = self.mempool.get(op_hash)
        return None if entry is None else entry.op

    def clear(self) -> None:
        self.mempool.clear()
        self.reputation.clear()
        self.tracked.clear()
