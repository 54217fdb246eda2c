"""The bundler's shared vocabulary: its bundling mode and what became of each op."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum

from entryway.domain.userop import UserOperation


class BundlingMode(StrEnum):
    AUTO = "auto"
    MANUAL = "manual"


class OpStatus(StrEnum):
    NOT_FOUND = "not_found"
    PENDING = "pending"
    SUBMITTED = "submitted"
    INCLUDED = "included"
    FAILED = "failed"
    DROPPED = "dropped"


MINED = frozenset({OpStatus.INCLUDED, OpStatus.FAILED})


@dataclass(slots=True)
class Tracked:
    """What became of an op this bundler accepted. A mined op this bundler bundled keeps
    its body and block (`op`, `block_number`): should a reorg remove that block, the op is
    sent to the mempool again (`Bundler.reinclude`)."""

    status: OpStatus
    tx_hash: str | None = None
    reason: str | None = None
    updated_at: float = field(default_factory=time.time)
    op: UserOperation | None = None
    block_number: int | None = None
