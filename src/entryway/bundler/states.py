"""The bundler's shared vocabulary: its bundling mode and what became of each op."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum


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


@dataclass(slots=True)
class Tracked:
    """What became of an op this bundler accepted."""

    status: OpStatus
    tx_hash: str | None = None
    reason: str | None = None
    updated_at: float = field(default_factory=time.time)
