"""An EventPublisher that keeps what it is told, once per idempotency key as the webhook
store does, for tests of what the service announces."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from entryway.domain.webhooks import EventType


class RecordedEvents:
    def __init__(self) -> None:
        self.emitted: dict[str, tuple[EventType, str, Mapping[str, Any]]] = {}
        self.unkeyed: list[tuple[EventType, str, Mapping[str, Any]]] = []

    async def emit(
        self,
        event_type: EventType,
        project_id: str,
        data: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> object:
        if idempotency_key is None:
            self.unkeyed.append((event_type, project_id, data))
        else:
            self.emitted.setdefault(idempotency_key, (event_type, project_id, data))
        return None

    def of(self, kind: EventType) -> list[tuple[str, Mapping[str, Any]]]:
        """(project, data) of every distinct event of this type."""
        every = [*self.emitted.values(), *self.unkeyed]
        return [(project, data) for t, project, data in every if t is kind]
