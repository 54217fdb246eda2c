"""The executor keys' balances, watched by the `entryway bundler` process of a chain bundled
from the intake (leader and standby alike): the only process that holds those keys.

An executor key pays the gas of every bundle it sends; drained, the chain's ops stop being
mined. The watch reads each key's balance every WATCH_INTERVAL_S (and whenever this process
becomes the leader), and:
- shows it: readiness (`chain.<id>.executors`, naming a key under the floor and its balance)
  and the `entryway_executor_balance_wei{chain,executor}` gauge;
- alerts once each time a key falls under the floor (a warning in the log, and `alert`, if
  given), again only after the key recovered and fell once more;
- with a funding key, tops the key up: the leader alone (one process spending the funding
  key, so its nonces never collide) sends `topup_wei` from it to each key under the floor,
  one transfer at a time, each waited for before the balances are read again; a transfer
  not mined in time is waited for at the next reads, never doubled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

from eth_account.signers.local import LocalAccount
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from entryway.chain.rpc import EthClient, RpcError, RpcTransportError, TransactionFailedError
from entryway.chain.transactor import Transactor
from entryway.errors import EntrywayError
from entryway.observability.readiness import NotReadyError
from entryway.waiting import woken

log = logging.getLogger("entryway.bundler.executors")
WATCH_INTERVAL_S = 15.0


@dataclass(frozen=True, slots=True)
class ExecutorFunding:
    """The floor an executor key's balance should stay over, and the top-up, if any."""

    min_balance_wei: int = 10**16
    topup_wei: int = 0  # 0: no top-up
    funding_key: LocalAccount | None = None

    @property
    def tops_up(self) -> bool:
        return self.topup_wei > 0 and self.funding_key is not None


@dataclass(frozen=True, slots=True)
class ExecutorBalance:
    chain_id: int
    executor: str
    balance_wei: int
    min_balance_wei: int

    @property
    def low(self) -> bool:
        return self.balance_wei < self.min_balance_wei


class ExecutorAlert(Protocol):
    """Told when an executor key falls under the floor (once per crossing)."""

    async def __call__(self, balance: ExecutorBalance) -> None: ...


class ExecutorWatch:
    def __init__(
        self,
        eth: EthClient,
        chain_id: int,
        executors: Sequence[str],
        funding: ExecutorFunding,
        *,
        alert: ExecutorAlert | None = None,
    ) -> None:
        self.eth = eth
        self.chain_id = chain_id
        self.executors = list(executors)
        self.funding = funding
        self.alert = alert
        self.balances: dict[str, int] = {}  # as last read
        self.top_ups = 0  # transfers sent from the funding key
        self._alerted: set[str] = set()  # keys under the floor, alerted for
        # A top-up sent but not seen mined yet, by executor: no second one meanwhile.
        self._unmined: dict[str, str] = {}
        self._topping_up = asyncio.Lock()
        self._wake = asyncio.Event()

    async def read(self) -> list[ExecutorBalance]:
        """Every executor's balance now; a key newly under the floor alerts."""
        wei = await asyncio.gather(*(self.eth.get_balance(a) for a in self.executors))
        floor = self.funding.min_balance_wei
        balances = [
            ExecutorBalance(self.chain_id, a, b, floor)
            for a, b in zip(self.executors, wei, strict=True)
        ]
        for balance in balances:
            self.balances[balance.executor] = balance.balance_wei
            if not balance.low:
                self._alerted.discard(balance.executor)  # recovered: may alert again
            elif balance.executor not in self._alerted:
                self._alerted.add(balance.executor)
                log.warning(
                    "chain %d: executor %s holds %d wei, under %d wei",
                    self.chain_id, balance.executor, balance.balance_wei, floor,
                )  # fmt: skip
                if self.alert is not None:
                    await self.alert(balance)
        return balances

    async def check(self, *, top_up: bool) -> list[ExecutorBalance]:
        """Read the balances; with `top_up` (the leader) and a funding key, top up each key
        under the floor, then read them again."""
        balances = await self.read()
        if not (top_up and self.funding.tops_up) or not any(b.low for b in balances):
            return balances
        async with self._topping_up:
            balances = await self.read()  # another check may have topped them up meanwhile
            for balance in balances:
                if balance.low:
                    await self._top_up(balance)
            return await self.read()

    async def _top_up(self, balance: ExecutorBalance) -> None:
        key, amount = self.funding.funding_key, self.funding.topup_wei
        assert key is not None
        if not await self._earlier_top_up_settled(balance.executor):
            return
        try:
            receipt = await Transactor(self.eth, key, self.chain_id).send(
                balance.executor, value=amount
            )
        except TransactionFailedError as exc:  # sent, not mined in time: wait for it
            self._unmined[balance.executor] = exc.tx_hash
            self.top_ups += 1
            log.error(
                "chain %d: the top-up of executor %s is not mined yet (%s)",
                self.chain_id, balance.executor, exc,
            )  # fmt: skip
            return
        except (EntrywayError, RpcError) as exc:  # the funding key drained too, say
            log.error(
                "chain %d: cannot top up executor %s from %s: %s",
                self.chain_id, balance.executor, key.address, exc,
            )  # fmt: skip
            return
        self.top_ups += 1
        log.info(
            "chain %d: topped up executor %s with %d wei from %s (tx %s)",
            self.chain_id, balance.executor, amount, key.address, receipt.tx_hash,
        )  # fmt: skip

    async def _earlier_top_up_settled(self, executor: str) -> bool:
        """Whether the last top-up sent to `executor`, if any, is mined or gone from the
        node (dropped): only then may another be sent."""
        tx_hash = self._unmined.get(executor)
        if tx_hash is None:
            return True
        if await self.eth.get_receipt(tx_hash) is None:
            known = await self.eth.rpc.request("eth_getTransactionByHash", [tx_hash])
            if known is not None:
                log.info(
                    "chain %d: executor %s waits for its top-up %s to be mined",
                    self.chain_id, executor, tx_hash,
                )  # fmt: skip
                return False
        del self._unmined[executor]
        return True

    def wake(self) -> None:
        """Check now rather than at the next interval (this process just became leader)."""
        self._wake.set()

    async def run(self, leading: Callable[[], bool], interval_s: float = WATCH_INTERVAL_S) -> None:
        while True:
            self._wake.clear()
            try:
                await self.check(top_up=leading())
            except (RpcError, RpcTransportError) as exc:
                log.warning("chain %d: cannot read the executors' balances: %s", self.chain_id, exc)
            except Exception:  # the watch outlives a surprise: it is all that watches
                log.exception("chain %d: the executors' watch failed; retrying", self.chain_id)
            await woken(self._wake, interval_s)

    async def readiness(self) -> str:
        """The `chain.<id>.executors` readiness check, on balances read now."""
        balances = await self.read()
        low = [f"{b.executor} holds {b.balance_wei} wei" for b in balances if b.low]
        floor = self.funding.min_balance_wei
        if low:
            raise NotReadyError(f"under {floor} wei: {'; '.join(low)}")
        poorest = min(b.balance_wei for b in balances)
        return f"{len(balances)} executor(s), the poorest holds {poorest} wei"

    def families(self) -> list[Metric]:
        chain = str(self.chain_id)
        balance = GaugeMetricFamily(
            "entryway_executor_balance_wei",
            "Each executor key's balance, as last read.",
            labels=("chain", "executor"),
        )
        for executor, wei in sorted(self.balances.items()):
            balance.add_metric((chain, executor), wei)
        floor = GaugeMetricFamily(
            "entryway_executor_min_balance_wei",
            "The balance under which an executor key makes the bundler not ready and alerts.",
            labels=("chain",),
        )
        floor.add_metric((chain,), self.funding.min_balance_wei)
        top_ups = CounterMetricFamily(
            "entryway_executor_topups",
            "Transfers from the funding key to an executor key under the floor.",
            labels=("chain",),
        )
        top_ups.add_metric((chain,), self.top_ups)
        return [balance, floor, top_ups]


@asynccontextmanager
async def watching(watch: ExecutorWatch, leading: Callable[[], bool]) -> AsyncIterator[None]:
    """`watch.run` in the background while the block runs."""
    task = asyncio.create_task(watch.run(leading))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
