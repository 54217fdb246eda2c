"""Settings for every test tier."""

import logging
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from entryway.observability.logs import HANDLER_NAME

# Property tests assert behaviour, never speed: on a loaded 2-core machine (anvil, the
# service and the tests share it) drawing an example can take a second, which is no failure.
settings.register_profile("entryway", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("entryway")


def pytest_xdist_auto_num_workers(config: object) -> int:
    """`-n auto` (the default): one worker per core, at most four. Each worker starts its own
    devnets, services and browser; past four they cost more memory and PostgreSQL
    connections than they save in time. `pytest -n 0` runs everything in one process."""
    return max(1, min(os.cpu_count() or 1, 4))


@pytest.fixture(autouse=True)
def _no_log_handler_outlives_its_test() -> Iterator[None]:
    """A test that starts the service or the worker in this process sets logging up
    (`configure_logging`) on the stderr pytest captured for that test, and pytest closes it
    afterwards: a handler left behind would fail ("I/O operation on closed file") at every
    line a later test logs. Removed, with the root level restored, once the test is over."""
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    for handler in root.handlers[:]:
        if handler.get_name() == HANDLER_NAME and handler not in before:
            root.removeHandler(handler)
    root.setLevel(level)
