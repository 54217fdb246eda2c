"""The service's garbage-collector settings (entryway.composition.collector)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from entryway.composition.collector import YOUNG_THRESHOLD, settle_collector


@pytest.fixture
def collector_restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("collector_restored")
def test_objects_made_at_start_leave_the_collectors_sight() -> None:
    kept_from_start = [[index] for index in range(1000)]
    settle_collector()
    assert gc.get_freeze_count() >= len(kept_from_start)
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD


@pytest.mark.usefixtures("collector_restored")
def test_cycles_made_later_are_still_collected() -> None:
    settle_collector()

    class Node:
        pass

    first, second = Node(), Node()
    first.other, second.other = second, first  # type: ignore[attr-defined]
    watched = weakref.ref(first)
    del first, second
    assert watched() is not None  # a cycle: reference counting alone never frees it
    gc.collect()
    assert watched() is None
