"""The bundler's map of what became of each op stays bounded, and evicting an op from it
does not make the bundler forget an op the chain has included."""

from __future__ import annotations

from typing import Any

from eth_account import Account

from entryway.bundler.gas.estimation import GasEstimator
from entryway.bundler.gas.l1fee import L1FeeQuoter
from entryway.bundler.receipts import ReceiptReader
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.service import Bundler, BundlerConfig
from entryway.bundler.states import OpStatus, Tracked
from entryway.bundler.submission import TransactionManager
from entryway.bundler.tracking import TrackedOps, TrackingLimits
from entryway.bundler.validation.rules import RuleSettings
from entryway.bundler.validation.simulation import Simulator, Validator
from entryway.chain.rpc import EthClient, JsonRpcClient

EP = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
CHAIN_ID = 80002


def op_hash(i: int) -> bytes:
    return i.to_bytes(32, "big")


def tx_hash(i: int) -> str:
    return "0x" + f"{i:064x}"


class ChainLogs(ReceiptReader):
    """What the chain's UserOperationEvent logs would answer, and how often they are read."""

    def __init__(self, eth: EthClient) -> None:
        super().__init__(eth, EP, CHAIN_ID, lookback_blocks=10_000)
        self.included: dict[bytes, str] = {}
        self.reads = 0

    async def receipt(
        self, op_hash: bytes, l1_fees: L1FeeQuoter | None = None
    ) -> dict[str, Any] | None:
        self.reads += 1
        tx = self.included.get(op_hash)
        if tx is None:
            return None
        return {
            "userOpHash": "0x" + op_hash.hex(),
            "success": True,
            "receipt": {"transactionHash": tx},
            "confirmations": "0x1",
        }

    async def of_bundle(
        self, op_hash: bytes, tx_hash: str, l1_fees: L1FeeQuoter | None = None
    ) -> dict[str, Any] | None:
        # An op still in the map is read off its bundle: the same chain answers.
        return await self.receipt(op_hash, l1_fees)


def bundler_with(limits: TrackingLimits) -> tuple[Bundler, ChainLogs]:
    # No call reaches this URL: the chain is ChainLogs, and nothing is bundled.
    eth = EthClient(JsonRpcClient("http://127.0.0.1:9"))
    validator = Validator(Simulator(eth, EP), EP, RuleSettings(min_stake_wei=10**18), CHAIN_ID)
    executors = [TransactionManager(eth, Account.create(), CHAIN_ID)]
    bundler = Bundler(eth, executors, validator, BundlerConfig(EP, CHAIN_ID, tracking=limits))
    bundler.receipts = chain = ChainLogs(eth)
    return bundler, chain


async def test_a_long_running_bundler_keeps_a_bounded_map_and_still_answers() -> None:
    bundler, chain = bundler_with(TrackingLimits(max_entries=1_000))
    for i in range(20_000):  # each op as the bundler sees it: accepted, sent, mined
        bundler.tracked[op_hash(i)] = Tracked(OpStatus.PENDING)
        bundler.tracked[op_hash(i)] = Tracked(OpStatus.SUBMITTED, tx_hash(i))
        bundler.tracked[op_hash(i)] = Tracked(OpStatus.INCLUDED, tx_hash(i))
        chain.included[op_hash(i)] = tx_hash(i)
    waiting = op_hash(20_000)
    bundler.tracked[waiting] = Tracked(OpStatus.PENDING)
    assert len(bundler.tracked) <= 1_000
    assert op_hash(0) not in bundler.tracked

    reads = chain.reads
    assert await bundler.status(waiting) == {"status": "pending"}
    assert chain.reads == reads  # answered from the map, as clients poll it hard

    # Long evicted, the first op is still answered: the chain's logs hold it.
    assert await bundler.status(op_hash(0)) == {
        "status": "included",
        "transactionHash": tx_hash(0),
        "confirmations": "0x1",
    }
    rpc = BundlerRpc(bundler, GasEstimator(bundler.eth, EP))
    receipt = await rpc.get_user_operation_receipt(["0x" + op_hash(0).hex()])
    assert receipt is not None and receipt["receipt"]["transactionHash"] == tx_hash(0)
    assert await bundler.status(op_hash(19_999)) == {
        "status": "included",
        "transactionHash": tx_hash(19_999),
        "confirmations": "0x1",
    }


def test_live_ops_outlast_final_ones_when_the_map_is_full() -> None:
    tracked = TrackedOps(TrackingLimits(max_entries=10))
    for i in range(5):
        tracked[op_hash(i)] = Tracked(OpStatus.PENDING)
    for i in range(5, 100):
        tracked[op_hash(i)] = Tracked(OpStatus.DROPPED, reason="expired")
    assert len(tracked) == 10
    assert all(tracked[op_hash(i)].status is OpStatus.PENDING for i in range(5))
    assert [h for h in tracked if tracked[h].status is OpStatus.DROPPED] == [
        op_hash(i) for i in range(95, 100)
    ]  # the newest final ones


def test_final_ops_are_forgotten_once_old_and_live_ones_are_not() -> None:
    now = [1_000.0]
    tracked = TrackedOps(TrackingLimits(final_retention_s=60.0), clock=lambda: now[0])
    tracked[op_hash(1)] = Tracked(OpStatus.INCLUDED, tx_hash(1), updated_at=now[0])
    tracked[op_hash(2)] = Tracked(OpStatus.PENDING, updated_at=now[0])
    now[0] += 30
    tracked[op_hash(3)] = Tracked(OpStatus.DROPPED, reason="replaced", updated_at=now[0])
    now[0] += 31
    tracked[op_hash(4)] = Tracked(OpStatus.SUBMITTED, tx_hash(4), updated_at=now[0])
    assert set(tracked) == {op_hash(2), op_hash(3), op_hash(4)}
    now[0] += 30
    tracked[op_hash(2)] = Tracked(OpStatus.INCLUDED, tx_hash(2), updated_at=now[0])
    assert set(tracked) == {op_hash(2), op_hash(4)}
    assert tracked.pop(op_hash(4)).status is OpStatus.SUBMITTED
    assert tracked.get(op_hash(4)) is None
