"""Readiness: named checks run together, each under its own short timeout, the outcome
kept for a couple of seconds.

A load balancer may poll readiness every second from several places; each poll must not
become a database query and a node call per chain. So one run serves every caller that
arrives while it is in flight or within `cache_s` after it ended.

A check that fails is logged when it starts failing (a warning with its detail) and when it
passes again (info), not at each poll: an outage of minutes would otherwise be hundreds of
the same line.

A check may also find its dependency gone while the process still serves without it (Redis,
whose counts each process then keeps itself): it raises DegradedError. The check shows as
not ok and is named under `degraded`, but the process stays ready: a load balancer must not
take every replica out over something none of them needs to answer."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from entryway.observability.redaction import mask_secrets

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 2.0
DEFAULT_CACHE_S = 2.0


class NotReadyError(Exception):
    """A check's failure, its message fit for the operator (no secrets, no credentials)."""


class DegradedError(NotReadyError):
    """A check's failure that the process serves through, in a lesser way its message says."""


# A check answers a short detail when it passes and raises NotReadyError (or anything
# else) when it does not.
Check = Callable[[], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    seconds: float
    degraded: bool = False  # not ok, but the process serves without it


@dataclass(frozen=True, slots=True)
class ReadinessReport:
    checks: tuple[CheckResult, ...]
    checked_at: float  # on the monotonic clock

    @property
    def ready(self) -> bool:
        return all(c.ok or c.degraded for c in self.checks)

    @property
    def failing(self) -> list[str]:
        return [c.name for c in self.checks if not (c.ok or c.degraded)]

    @property
    def degraded(self) -> list[str]:
        return [c.name for c in self.checks if c.degraded]


class Readiness:
    def __init__(
        self,
        checks: Callable[[], Mapping[str, Check]],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        cache_s: float = DEFAULT_CACHE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._checks = checks  # asked at each run: chains may come and go while serving
        self.timeout_s = timeout_s
        self.cache_s = cache_s
        self._clock = clock
        self._last: ReadinessReport | None = None
        self._running: asyncio.Task[ReadinessReport] | None = None
        self._failing: set[str] = set()  # checks failing at the last run
        self._reasons: dict[str, str] = {}  # an unexpected error's masked text, for the log

    async def report(self) -> ReadinessReport:
        last = self._last
        if last is not None and self._clock() - last.checked_at < self.cache_s:
            return last
        if self._running is None or self._running.done():
            self._running = asyncio.create_task(self._run())
        # Shielded: a caller that goes away does not cancel the run the others wait on.
        return await asyncio.shield(self._running)

    async def _run(self) -> ReadinessReport:
        checks = dict(self._checks())
        results = await asyncio.gather(*(self._one(n, c) for n, c in checks.items()))
        self._log_changes(results)
        self._last = ReadinessReport(tuple(results), self._clock())
        return self._last

    def _log_changes(self, results: list[CheckResult]) -> None:
        for result in results:
            reason = self._reasons.pop(result.name, result.detail)
            if not result.ok and result.name not in self._failing:
                self._failing.add(result.name)
                log.warning(
                    "readiness check %s %s: %s; logged again when it passes",
                    result.name,
                    "degraded" if result.degraded else "failing",
                    reason,
                )
            elif result.ok and result.name in self._failing:
                self._failing.discard(result.name)
                log.info("readiness check %s passing again", result.name)

    async def _one(self, name: str, check: Check) -> CheckResult:
        started = self._clock()
        try:
            detail = await asyncio.wait_for(check(), self.timeout_s)
        except TimeoutError:
            return self._failed(name, f"no answer within {self.timeout_s:g} s", started)
        except DegradedError as exc:
            return self._failed(name, str(exc), started, degraded=True)
        except NotReadyError as exc:
            return self._failed(name, str(exc), started)
        except Exception as exc:
            # The exception's text may hold a URL or a driver's connection string: the type
            # alone goes out; the log gets the masked text.
            self._reasons[name] = mask_secrets(repr(exc))
            log.debug("readiness check %s failed: %s", name, self._reasons[name])
            return self._failed(name, f"failed ({type(exc).__name__})", started)
        return CheckResult(name, True, mask_secrets(detail), self._clock() - started)

    def _failed(
        self, name: str, detail: str, started: float, *, degraded: bool = False
    ) -> CheckResult:
        return CheckResult(name, False, mask_secrets(detail), self._clock() - started, degraded)
