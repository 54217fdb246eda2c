"""A mined bundle that reverted whole: who answers for it, and what becomes of its ops.

Every bundle is run by eth_call just before it is sent (`bundle_sender`), so a bundle mined
reverted means an op's validation passed then and failed on chain: another transaction of
the block changed what it depended on. ERC-7562 exists to rule that out; a bundler
validating in a weaker mode (`calls`, `untraced`: docs/bundler.md, "Validation modes")
cannot, so this is its guard. The bundle is run again by eth_call on the state of the block
that mined it, and the op the EntryPoint names there (`FailedOp`) is blamed:
- it fails, with a reason naming the bundle's gas it wasted (the service's leader writes
  that back, and the op's project, charged its relay when the op was accepted, is not
  refunded);
- its factory and paymaster, and its sender when staked, are penalised under the reputation
  rules (GREP-040's penalty: banned until they win back inclusions), and an unstaked sender's
  further ops are refused for the same reason through its count;
- the bundle's other ops go back to the mempool, validated again, for the next bundle.
Reverted bundles are counted (`entryway_bundles_reverted_total`), and past `ALERT_PER_HOUR`
in an hour the operator is alerted (an error in the log, once per crossing).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

from entryway import contracts
from entryway.bundler.errors import BundlerError
from entryway.bundler.mempool import MempoolEntry
from entryway.bundler.states import OpStatus, Tracked
from entryway.bundler.submission import Attempt
from entryway.bundler.validation.simulation import failed_op_error
from entryway.chain.rpc import RpcError, RpcTransportError, TxReceipt

if TYPE_CHECKING:
    from entryway.bundler.service import Bundler

log = logging.getLogger("entryway.bundler")
EP = contracts.load("EntryPoint").abi
ALERT_PER_HOUR = 3  # reverted bundles in an hour that make an operator alert
HOUR_S = 3_600.0


class RevertedBundles:
    def __init__(self, bundler: Bundler, alert_per_hour: int = ALERT_PER_HOUR) -> None:
        self.bundler = bundler
        self.alert_per_hour = alert_per_hour
        self._recent: deque[float] = deque()  # when each recent reverted bundle was seen
        self.alerting = False

    async def blame(
        self, receipt: TxReceipt, ops: Sequence[MempoolEntry], attempts: Sequence[Attempt]
    ) -> None:
        bundler = self.bundler
        bundler.counts.bundles_reverted += 1
        bundler.counts.bundle_gas_used += receipt.gas_used
        self._count()
        culprit, why = await self._culprit(receipt, ops)
        wasted = receipt.gas_used * receipt.effective_gas_price
        log.warning(
            "bundle %s reverted on chain (%d ops, %d wei of gas): %s",
            receipt.tx_hash, len(ops), wasted, why,
        )  # fmt: skip
        for entry in ops:
            if entry is culprit:
                self._fail(entry, receipt, attempts, why, wasted)
            else:
                await self._requeue(entry)

    async def _culprit(
        self, receipt: TxReceipt, ops: Sequence[MempoolEntry]
    ) -> tuple[MempoolEntry | None, str]:
        """The op the EntryPoint names when the bundle runs again on the mined block's state,
        and why; (None, why) when it names none."""
        bundler = self.bundler
        data = bundler.codec.handle_ops([e.op for e in ops], bundler.beneficiary)
        try:
            await bundler.eth.call(
                bundler.config.entry_point,
                data,
                sender=bundler.executors[0].address,
                block=hex(receipt.block_number),
            )
        except RpcError as exc:
            decoded = EP.decode_error(exc.revert_data or b"")
            if decoded is not None and decoded.name in ("FailedOp", "FailedOpWithRevert"):
                index = int(decoded.args[0])
                if 0 <= index < len(ops):
                    return ops[index], failed_op_error(decoded).message
            return None, f"the EntryPoint reverted without naming an op ({exc.message})"
        except RpcTransportError as exc:
            return None, f"not found out: {exc}"
        return None, "it passes when run again: the block's order decided"

    def _fail(
        self,
        entry: MempoolEntry,
        receipt: TxReceipt,
        attempts: Sequence[Attempt],
        why: str,
        wasted: int,
    ) -> None:
        bundler = self.bundler
        reason = (
            f"its validation failed on chain and reverted its bundle ({why}); the bundle's "
            f"gas, {wasted} wei, was spent for nothing"
        )
        bundler.tracked[entry.user_op_hash] = Tracked(
            OpStatus.FAILED, receipt.tx_hash, reason, attempts=attempts
        )
        bundler.counts.ops_reverted += 1
        for address in {*entry.accountable(), entry.op.sender}:
            bundler.reputation.penalise(address)

    async def _requeue(self, entry: MempoolEntry) -> None:
        """An op that did not revert the bundle: back in the mempool if it still validates."""
        bundler = self.bundler
        bundler.tracked.pop(entry.user_op_hash, None)
        try:
            await bundler.send(entry.op)
        except BundlerError as exc:
            reason = f"its bundle reverted on chain and it no longer validates: {exc.message}"
            bundler.tracked[entry.user_op_hash] = Tracked(OpStatus.DROPPED, reason=reason)
            bundler.counts.ops_dropped += 1

    def _count(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self._recent.append(now)
        while self._recent and self._recent[0] < now - HOUR_S:
            self._recent.popleft()
        over = len(self._recent) >= self.alert_per_hour
        if over and not self.alerting:
            log.error(
                "operator alert: chain %d: %d bundles reverted on chain in the last hour; "
                "ops pass validation and fail when mined (validation mode %s): check the "
                "node, or pin a stronger validation mode",
                self.bundler.config.chain_id,
                len(self._recent),
                self.bundler.validator.mode.value,
            )
        self.alerting = over
