"""Which chains are under maintenance now (requirements §7: "the network is not under
maintenance"): those the settings mark, and those the operator put under maintenance from
the dashboard. The operator's are kept in the database, so every process (API replicas,
bundlers, workers) sees the same; each process rereads them at most every couple of seconds,
and at once after its own change."""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime

from entryway.storage.maintenance import MaintenanceRecords, MaintenanceWindow
from entryway.storage.single_flight import SingleFlight

FRESH_FOR_SECONDS = 2.0
CONFIGURED_REASON = "marked in the service's settings"


class ChainMaintenance:
    """The one place the maintenance state is read and changed."""

    def __init__(
        self, configured: Iterable[int] = (), records: MaintenanceRecords | None = None
    ) -> None:
        self.configured: set[int] = set(configured)  # the settings' `maintenance = true`
        self.records = records  # None: the settings' flag only (no database yet)
        self._read: dict[int, MaintenanceWindow] = {}
        self._fresh_until = 0.0
        self._reading: SingleFlight[None, dict[int, MaintenanceWindow]] = SingleFlight()

    async def window(self, chain_id: int) -> MaintenanceWindow | None:
        """The chain's maintenance, or None when it is open for operations."""
        return (await self.windows()).get(chain_id)

    async def windows(self) -> dict[int, MaintenanceWindow]:
        """Every chain under maintenance now; the settings' flag wins over a stored reason."""
        stored = await self._stored()
        marked = {c: MaintenanceWindow(c, CONFIGURED_REASON, None) for c in self.configured}
        return {**stored, **marked}

    async def begin(self, chain_id: int, reason: str, at: datetime) -> None:
        await self._writable().begin(chain_id, reason, at)
        self._reread()

    async def end(self, chain_id: int) -> None:
        await self._writable().end(chain_id)
        self._reread()

    async def _stored(self) -> dict[int, MaintenanceWindow]:
        if self.records is None:
            return {}
        if time.monotonic() >= self._fresh_until:
            # The requests in flight when the state goes stale share one read.
            self._read = await self._reading(None, self.records.windows)
            self._fresh_until = time.monotonic() + FRESH_FOR_SECONDS
        return self._read

    def _reread(self) -> None:
        """Read again at the next call, not sharing a read begun before this change."""
        self._fresh_until = 0.0
        self._reading = SingleFlight()

    def _writable(self) -> MaintenanceRecords:
        if self.records is None:
            raise RuntimeError("the service is not started: maintenance has no database")
        return self.records
