"""Telling a database that cannot serve from one that refused a statement.

While PostgreSQL restarts, fails over or is out of connections, every unit of work fails
with a connection error; the request was not carried out and may be sent again once the
database answers. The same holds while it answers and cannot carry a unit out whatever the
statement: out of connections, disk or memory (class 53), or read-only (25006: the standby
a client still reaches after a failover, or a primary set read-only as its disk fills). The
service answers those 503 with Retry-After (service/edge.py) instead of a 500 that reads as a
bug. A statement the database refused for what it is (a constraint, a syntax error, its
timeout) is not an outage: it stays a 500."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from asyncpg import exceptions as pg
from sqlalchemy import exc as sa

# PostgreSQL's class 08 (connection exceptions), the class 57 states of a server going down
# or not yet up (not 57014, a statement cancelled by its timeout), and a server that answers
# but can carry out no unit of work for now (class 53, 25006).
_UNAVAILABLE = (
    sa.TimeoutError,  # no pooled connection came free in time
    OSError,  # refused, reset, timed out: raised by the driver only (see below)
    pg.PostgresConnectionError,
    pg.AdminShutdownError,
    pg.CrashShutdownError,
    pg.CannotConnectNowError,
    pg.InsufficientResourcesError,  # class 53: too many connections, disk full, out of memory
    pg.ReadOnlySQLTransactionError,  # 25006: a write reached a read-only server
)


_DRIVERS = frozenset({"asyncpg", "sqlalchemy"})


def database_unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the database could not be reached (connecting, or the connection
    lost mid-statement), as SQLAlchemy or asyncpg raise it."""
    chain = list(_chain(exc))
    if not any(isinstance(e, sa.SQLAlchemyError | pg.PostgresError) or _raised_in_driver(e)
               for e in chain):  # fmt: skip
        return False  # an OSError of an RPC node or a webhook is no database outage
    return any(
        (isinstance(e, sa.DBAPIError) and e.connection_invalidated) or isinstance(e, _UNAVAILABLE)
        for e in chain
    )


def unavailable_reason(exc: BaseException) -> str:
    """The name of what made `exc` an outage (`ReadOnlySQLTransactionError`,
    `ConnectionRefusedError`...), for a log line: never its text, which may hold a URL."""
    found = next((e for e in _chain(exc) if isinstance(e, _UNAVAILABLE)), exc)
    return type(found).__name__


class OutageLog:
    """A loop's database outage said once, a warning naming its cause without a traceback,
    and its end once at info, however often the loop tries in between."""

    def __init__(self, log: logging.Logger, who: str) -> None:
        self.log, self.who = log, who
        self.away = False

    def failed(self, exc: BaseException) -> bool:
        """Whether `exc` is an outage (`database_unavailable`): logged if it is a new one."""
        if not database_unavailable(exc):
            return False
        if not self.away:
            self.away = True
            self.log.warning(
                "%s: the database is unavailable (%s); logged again when it answers",
                self.who,
                unavailable_reason(exc),
            )
        return True

    def answered(self) -> None:
        if self.away:
            self.away = False
            self.log.info("%s: the database answers again", self.who)


def _raised_in_driver(exc: BaseException) -> bool:
    """Whether `exc` came out of asyncpg or SQLAlchemy code: a refused connection reaches the
    caller as the bare OSError asyncpg's connect raised."""
    tb = exc.__traceback__
    while tb is not None:
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        if module.split(".", 1)[0] in _DRIVERS:
            return True
        tb = tb.tb_next
    return False


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, its causes and contexts, and the driver's errors SQLAlchemy wrapped."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        linked = [current.__cause__, current.__context__]
        if isinstance(current, sa.DBAPIError):
            linked.append(current.orig)
        todo.extend(e for e in linked if isinstance(e, BaseException))
