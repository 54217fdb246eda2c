"""Each project's lots as this process last read or wrote them, for a moment: a group of
accepted ops planned from them spares the read of its project's lots, a round trip
(`ledger_accepted.write_unlocked`).

What was seen is only a plan's starting point, never its proof: the statement that writes
the plan draws only if every lot still holds what the plan takes from it
(`ledger_at_once`), so lots drawn down since by anyone cannot be overdrawn. Two things the
moment may miss are handled by the caller: a plan that would charge overage is made again
from a fresh read (credits granted since are never passed over for overage), and a lot
granted within the moment is drawn on once the moment is over (`ttl_s`). Groups written
side by side each leave their own view; only one planned from the view still kept replaces
it (`wrote`), any other makes the next group read afresh.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from entryway.domain.credits import CreditAccount
from entryway.storage.ledger_postings import LockedProject

TTL_S = 1.0  # how long a read of a project's lots is planned from
MAX_PROJECTS = 10_000  # the projects remembered at once; the oldest read is let go first


@dataclass(frozen=True, slots=True)
class Seen:
    locked: LockedProject  # the project's row (its cycle's overage, its budget), unlocked
    account: CreditAccount
    read_at: float  # when the database was read (`clock`); writes since do not renew it


class LotsSeen:
    def __init__(
        self,
        ttl_s: float = TTL_S,
        *,
        max_projects: int = MAX_PROJECTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_s
        self.max_projects = max_projects
        self.clock = clock
        self._seen: dict[str, Seen] = {}

    def now(self) -> float:
        return self.clock()

    def get(self, project_id: str) -> Seen | None:
        seen = self._seen.get(project_id)
        if seen is None or self.clock() - seen.read_at >= self.ttl_s:
            return None
        return seen

    def put(self, project_id: str, seen: Seen) -> None:
        self._seen.pop(project_id, None)  # to the end: the latest read is let go last
        self._seen[project_id] = seen
        while len(self._seen) > self.max_projects:
            del self._seen[next(iter(self._seen))]

    def wrote(self, project_id: str, planned_from: Seen, after: Seen) -> None:
        """A group planned from `planned_from` was written, leaving the lots as `after`.
        Kept only if no other group has put its own view since (groups written side by
        side): two views, each without the other's draws, would not add up."""
        current = self._seen.get(project_id)
        if current is None or current is planned_from:
            self.put(project_id, after)
        else:
            self.forget(project_id)

    def forget(self, project_id: str) -> None:
        self._seen.pop(project_id, None)
