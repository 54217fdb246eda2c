"""Recoveries in the database and the flow's at-least-once tasks, on SQLite and PostgreSQL:
state changes are compare-and-set and carry their task in the same transaction; a task rerun
after a crash never sends a step's op twice, and gives back the hold of an op never sent."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.plans import PlanName
from entryway.domain.signatures import recovery_digest, sign_digest
from entryway.domain.tasks import RetryTaskError
from entryway.domain.userop import UserOperation
from entryway.service.services import Services
from entryway.service.wallet_wiring import recovery_flows
from entryway.storage.recoveries import RecoveryStore
from entryway.storage.store import Store
from entryway.storage.tasks import TaskQueue
from entryway.wallets.ports import OpFate, OpOutcome, ScheduledTask, Submission
from entryway.wallets.recoveries import FINALIZE_TASK, START_TASK, RecoveryFlow, RecoverySettings
from entryway.wallets.recovery import Approval, ChainRecovery, Recovery, RecoveryState
from entryway.wallets.tasks import wallet_task_handlers
from tests.integration.harness import Harness

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
CHAIN = 80002
ACCOUNT = "0x1111111111111111111111111111111111111111"
OWNER = "0x2222222222222222222222222222222222222222"
NEW_OWNER = "0x3333333333333333333333333333333333333333"


async def project(engine: AsyncEngine) -> str:
    store = Store(engine)
    user = await store.create_user(f"{uuid.uuid4()}@example.org", NOW)
    return await store.create_project(user, "r", PlanName.FREE, [CHAIN], NOW)


def collecting(project_id: str, guardians: tuple[str, ...] = ("0x" + "44" * 20,)) -> Recovery:
    return Recovery(
        recovery_id=str(uuid.uuid4()), project_id=project_id, key_id=None, chain_id=CHAIN,
        account=ACCOUNT, new_owner=NEW_OWNER, recovery_nonce=0, threshold=1,
        guardians=guardians, state=RecoveryState.COLLECTING, created_at=NOW, updated_at=NOW,
    )  # fmt: skip


async def test_state_changes_are_compare_and_set_with_their_task(engine: AsyncEngine) -> None:
    store, queue = RecoveryStore(engine), TaskQueue(engine)
    pid = await project(engine)
    recovery = collecting(pid)
    await store.create(recovery)
    assert await store.get(recovery.recovery_id, "another-project") is None
    assert await store.open_for(pid, CHAIN, ACCOUNT) == await store.get(recovery.recovery_id)

    guardian = recovery.guardians[0]
    await store.add_approval(recovery.recovery_id, Approval(guardian, b"\x01" * 65, NOW))
    await store.add_approval(recovery.recovery_id, Approval(guardian, b"\x02" * 65, NOW))
    got = await store.get(recovery.recovery_id, pid)
    assert got is not None and [a.signature for a in got.approvals] == [b"\x02" * 65]

    starting = replace(got, state=RecoveryState.STARTING)
    task = ScheduledTask(START_TASK, "start", run_at=NOW + timedelta(hours=1))
    # From a state it is no longer in: nothing written, no task queued.
    assert await store.save(starting, expected=RecoveryState.STARTED, task=task) is None
    assert await queue.list(pid) == []
    saved = await store.save(starting, expected=RecoveryState.COLLECTING, task=task)
    assert saved is not None and saved.state is RecoveryState.STARTING
    (queued,) = await queue.list(pid)
    assert (queued.task_id, queued.kind, queued.run_at) == (
        saved.start.task_id,
        START_TASK,
        task.run_at,
    )
    assert queued.payload == {"recoveryId": recovery.recovery_id}
    assert await store.save(starting, expected=RecoveryState.COLLECTING, task=task) is None

    done = replace(saved, state=RecoveryState.FAILED, failure_reason="because")
    assert await store.save(done, expected=RecoveryState.STARTING) is not None
    assert await store.open_for(pid, CHAIN, ACCOUNT) is None  # ended: no longer in progress


class FakeChain:
    def __init__(self, guardian: str) -> None:
        self.guardian = guardian
        self.state = ChainRecovery(OWNER, 0, None, 0)
        self.now = 1_000

    async def recovery(self, chain_id: int, account: str) -> ChainRecovery:
        return self.state

    async def guardians(self, chain_id: int, account: str) -> tuple[tuple[str, ...], int]:
        return (self.guardian,), 1

    async def is_guardian(self, chain_id: int, account: str, guardian: str) -> bool:
        return guardian == self.guardian

    async def block_time(self, chain_id: int) -> int:
        return self.now

    async def cancellation_tx(self, chain_id: int, account: str, recovery_nonce: int) -> None:
        return None


class FakeOps:
    """Ops that are never really sent: the test decides their fate."""

    def __init__(self, chain: FakeChain) -> None:
        self.chain = chain
        self.prepared: list[Submission] = []
        self.sent: list[str] = []
        self.released: list[str] = []
        self.fates: dict[str, OpFate] = {}
        self.die_on_send = False
        self.drop = False  # the next op sent is dropped by the bundler at once

    async def prepare(
        self, project_id: str, chain_id: int, sender: str, call_data: bytes, *, purpose: str
    ) -> Submission:
        op = UserOperation(sender, 0, call_data, 1, 1, 1, 1, 1)
        sub = Submission(project_id, chain_id, f"0x{len(self.prepared) + 1:064x}", op, 2_000)
        self.prepared.append(sub)
        return sub

    async def send(self, submission: Submission) -> None:
        if self.die_on_send:
            self.die_on_send = False
            raise SystemError("the worker died before sending")
        self.sent.append(submission.user_op_hash)
        self.fates[submission.user_op_hash] = OpFate.DROPPED if self.drop else OpFate.PENDING
        self.drop = False

    async def outcome(self, submission: Submission) -> OpOutcome:
        fate = self.fates.get(submission.user_op_hash, OpFate.DROPPED)
        if fate is OpFate.DROPPED:
            self.released.append(submission.user_op_hash)
        return OpOutcome(fate, "0x" + "ab" * 32 if fate is OpFate.INCLUDED else None)

    def mine(self, op_hash: str) -> None:
        self.fates[op_hash] = OpFate.INCLUDED
        self.chain.state = ChainRecovery(OWNER, 0, NEW_OWNER, self.chain.now + 3_600)


class Events:
    def __init__(self) -> None:
        self.emitted: list[tuple[str, dict[str, Any]]] = []

    async def emit(self, event_type: Any, project_id: str, data: Any, **_: Any) -> None:
        self.emitted.append((event_type.value, dict(data)))


async def test_a_rerun_task_never_sends_a_step_twice(engine: AsyncEngine) -> None:
    guardian = Harness.new_key()
    chain = FakeChain(guardian.address)
    ops, events = FakeOps(chain), Events()
    store = RecoveryStore(engine)
    flow = RecoveryFlow(
        store, chain, ops, events, settings=RecoverySettings(receipt_wait_s=0), clock=lambda: NOW
    )
    pid = await project(engine)
    recovery = await flow.open(pid, None, CHAIN, ACCOUNT, NEW_OWNER)
    digest = recovery_digest(ACCOUNT, NEW_OWNER, 0, CHAIN)
    signature = sign_digest(bytes(guardian.key), digest)
    recovery = await flow.approve(pid, recovery.recovery_id, guardian.address, signature)
    assert recovery.state is RecoveryState.STARTING
    rid = recovery.recovery_id

    # The worker dies after recording the op, before sending it: the rerun finds it never
    # went out (its hold is released) and submits a fresh one.
    ops.die_on_send = True
    with pytest.raises(SystemError):
        await flow.run_start(rid)
    (first,) = ops.prepared
    with pytest.raises(RetryTaskError, match="not mined yet"):
        await flow.run_start(rid)
    assert ops.released == [first.user_op_hash] and len(ops.prepared) == 2
    second = ops.prepared[1]
    assert ops.sent == [second.user_op_hash]

    # Still pending: asked again, not sent again. Mined: started, once.
    with pytest.raises(RetryTaskError):
        await flow.run_start(rid)
    ops.mine(second.user_op_hash)
    assert (await flow.run_start(rid))["state"] == "started"
    assert (await flow.run_start(rid))["state"] == "started"
    assert ops.sent == [second.user_op_hash]
    assert [kind for kind, _ in events.emitted] == ["recovery.started"]
    started = await store.get(rid)
    assert started is not None and started.execute_after == chain.now + 3_600
    finalize = await TaskQueue(engine).find(started.finalize.task_id or "")
    assert finalize is not None and finalize.kind == FINALIZE_TASK
    assert finalize.run_at == NOW + timedelta(seconds=3_600 + 5)  # chain delay, in wall time

    # Due in chain time, the finalize task sends its op; dropped at once, the next attempt
    # sends a new one; a rerun while it is pending only asks about it.
    chain.now += 3_601
    ops.drop = True
    with pytest.raises(RetryTaskError, match="dropped"):
        await flow.run_finalize(rid)
    with pytest.raises(RetryTaskError, match="not mined yet"):
        await flow.run_finalize(rid)
    with pytest.raises(RetryTaskError, match="not mined yet"):
        await flow.run_finalize(rid)
    assert len(ops.sent) == 3 and ops.released[-1] == ops.sent[1]
    ops.fates[ops.sent[2]] = OpFate.INCLUDED
    assert (await flow.run_finalize(rid))["state"] == "finalized"
    assert [kind for kind, _ in events.emitted] == ["recovery.started", "recovery.finalized"]


async def test_a_task_that_fails_its_last_attempt_fails_the_recovery(engine: AsyncEngine) -> None:
    services = Services()  # no chain configured: every attempt fails
    services.attach(Store(engine))
    store, queue = RecoveryStore(engine), TaskQueue(engine)
    pid = await project(engine)
    recovery = collecting(pid)
    await store.create(recovery)
    starting = replace(recovery, state=RecoveryState.STARTING)
    task = ScheduledTask(START_TASK, "start", max_attempts=2)
    assert await store.save(starting, expected=RecoveryState.COLLECTING, task=task)
    handlers = wallet_task_handlers(recovery_flows(services))
    for attempt in (1, 2):
        (claimed,) = await queue.claim("w", [START_TASK], lease_seconds=30)
        with pytest.raises(KeyError):
            await handlers[START_TASK](claimed)
        await queue.fail(claimed.task_id, "w", "failed", retry_in=0)
        now = await store.get(recovery.recovery_id)
        assert now is not None
        assert now.state is (RecoveryState.STARTING if attempt == 1 else RecoveryState.FAILED)
    failed = await store.get(recovery.recovery_id)
    assert failed is not None and "gave up" in (failed.failure_reason or "")
