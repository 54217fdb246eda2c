"""The bundler's shared vocabulary: its bundling mode and what became of each op."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from entryway.domain.userop import UserOperation

if TYPE_CHECKING:
    from entryway.bundler.submission import Attempt


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
    # The sends of the op's bundle, fee bumps included: the bundle's own list, so a
    # replacement sent later shows here too.
    attempts: Sequence[Attempt] = ()
