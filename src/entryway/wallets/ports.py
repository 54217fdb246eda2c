"""What the wallet use cases need from the rest of the service, as narrow ports: the
recoveries' storage, the chain's view of an account, and submitting a UserOperation the
service sponsors itself. `wallets.chain` and `wallets.sponsored_ops` implement the last two
(wired over the running service by `service.wallet_wiring`); `storage.recoveries` the first."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

import orjson

from entryway.domain.userop import UserOperation
from entryway.domain.userop_json import op_from_json, op_to_json
from entryway.errors import EntrywayError
from entryway.wallets.recovery import Approval, ChainRecovery, Recovery, RecoveryState


class NotASmartAccountError(EntrywayError):
    """Nothing is deployed at the address, or it is not an Entryway SmartAccount."""


class OpRejectedError(EntrywayError):
    """The bundler (or its simulation) refused the op: sending it again cannot help."""


@dataclass(frozen=True, slots=True)
class Submission:
    """A signed, sponsored op the service holds credits for, sent or about to be."""

    project_id: str
    chain_id: int
    user_op_hash: str
    op: UserOperation
    valid_until: int  # unix seconds: the paymaster's signature expires then

    def to_json(self) -> str:
        doc: dict[str, Any] = {
            "projectId": self.project_id,
            "chainId": self.chain_id,
            "userOpHash": self.user_op_hash,
            "op": op_to_json(self.op),
            "validUntil": self.valid_until,
        }
        return orjson.dumps(doc).decode()

    @classmethod
    def from_json(cls, text: str) -> Submission:
        doc = orjson.loads(text)
        return cls(
            doc["projectId"],
            int(doc["chainId"]),
            doc["userOpHash"],
            op_from_json(doc["op"]),
            int(doc["validUntil"]),
        )


class OpFate(StrEnum):
    PENDING = "pending"  # in the mempool or in a bundle not mined yet
    INCLUDED = "included"  # mined, its execution succeeded
    REVERTED = "reverted"  # mined, its execution reverted (the gas was still paid)
    DROPPED = "dropped"  # the bundler no longer has it and it was never mined


@dataclass(frozen=True, slots=True)
class OpOutcome:
    fate: OpFate
    transaction_hash: str | None = None
    reason: str | None = None


class SponsoredOps(Protocol):
    """Submitting an op on a chain, sponsored by the service's paymaster, charged to a
    project (a hold at signing, settled from the receipt or released when dropped)."""

    async def prepare(
        self, project_id: str, chain_id: int, sender: str, call_data: bytes, *, purpose: str
    ) -> Submission:
        """Estimate, hold the estimate, sign: the op, ready to send. OpRejectedError if the
        chain refuses it already in simulation."""
        ...

    async def send(self, submission: Submission) -> None:
        """Hand it to the chain's bundler; OpRejectedError (hold released) if refused."""
        ...

    async def outcome(self, submission: Submission) -> OpOutcome:
        """What became of it; settles the hold on a receipt, releases it when dropped."""
        ...


class AccountChain(Protocol):
    """Reads of an Entryway SmartAccount on a chain."""

    async def recovery(self, chain_id: int, account: str) -> ChainRecovery:
        """Owner, recovery nonce and pending recovery; NotASmartAccountError if there is no
        SmartAccount at `account`."""
        ...

    async def guardians(self, chain_id: int, account: str) -> tuple[tuple[str, ...], int]:
        """The guardian set and the threshold."""
        ...

    async def is_guardian(self, chain_id: int, account: str, guardian: str) -> bool: ...

    async def block_time(self, chain_id: int) -> int:
        """The latest block's timestamp: the clock recovery delays run on."""
        ...

    async def cancellation_tx(self, chain_id: int, account: str, recovery_nonce: int) -> str | None:
        """The transaction of the RecoveryCancelled event for this nonce, if one is found."""
        ...


@dataclass(frozen=True, slots=True)
class ScheduledTask:
    """A task to enqueue with a state change, in the same transaction."""

    kind: str
    step: str  # "start" or "finalize": which step's task id it becomes
    run_at: datetime | None = None
    max_attempts: int = 25


class RecoveryRepository(Protocol):
    async def create(self, recovery: Recovery) -> None: ...

    async def get(self, recovery_id: str, project_id: str | None = None) -> Recovery | None:
        """A recovery with its approvals; with `project_id`, only that project's."""
        ...

    async def open_for(self, project_id: str, chain_id: int, account: str) -> Recovery | None:
        """The project's recovery of this account that has not ended, if any."""
        ...

    async def add_approval(self, recovery_id: str, approval: Approval) -> None:
        """Store a guardian's approval (a guardian approving again replaces theirs)."""
        ...

    async def save(
        self, recovery: Recovery, *, expected: RecoveryState, task: ScheduledTask | None = None
    ) -> Recovery | None:
        """Write `recovery` if it is still in state `expected` (None otherwise: another
        worker or request moved it); enqueue `task` in the same transaction."""
        ...
