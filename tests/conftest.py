"""Settings for every test tier."""

import os

from hypothesis import HealthCheck, settings

# Property tests assert behaviour, never speed: on a loaded 2-core machine (anvil, the
# service and the tests share it) drawing an example can take a second, which is no failure.
settings.register_profile("entryway", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("entryway")


def pytest_xdist_auto_num_workers(config: object) -> int:
    """`-n auto` (the default): one worker per core, at most four. Each worker starts its own
    devnets, services and browser; past four they cost more memory and PostgreSQL
    connections than they save in time. `pytest -n 0` runs everything in one process."""
    return max(1, min(os.cpu_count() or 1, 4))
