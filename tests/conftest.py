"""Settings for every test tier."""

from hypothesis import HealthCheck, settings

# Property tests assert behaviour, never speed: on a loaded 2-core machine (anvil, the
# service and the tests share it) drawing an example can take a second, which is no failure.
settings.register_profile("entryway", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("entryway")
