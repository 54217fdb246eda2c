"""What stands before a password or the operator token is checked: throttles per client
address and per (client address, account), and the bounded hashing of `PasswordWork`.

No account is ever locked as such: an account guessed at from one address stays open to its
owner at another, and the answers are the same whether the account exists or not (an unknown
email is throttled by the same keys and verified against a dummy hash). The counts live in
Redis when the service has one (`redis_url`), shared by every API process; otherwise in this
process's memory."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import redis.asyncio as redis
from fastapi import Request

from entryway.dashboard.passwords import PasswordWork
from entryway.domain.throttle import Rate, Throttle
from entryway.errors import EntrywayError
from entryway.service.shared_throttle import RedisThrottle


@dataclass(frozen=True, slots=True)
class SignInLimits:
    """The defaults are documented in docs/security.md."""

    per_address: Rate = field(default_factory=lambda: Rate(20, 60))
    per_account: Rate = field(default_factory=lambda: Rate(5, 900))
    operator_per_address: Rate = field(default_factory=lambda: Rate(5, 60))
    hashing_threads: int = 1
    hashing_queue: int = 8


class TooManyAttemptsError(EntrywayError):
    """Refused before any password work: answered 429 with Retry-After `retry_after_s`."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"too many attempts: retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


def client_address(request: Request) -> str:
    """Who is asking, as throttles count them: the peer's address (as the server's proxy
    settings give it), an IPv6 client by its /64, since one host commonly holds all of it."""
    host = request.client.host if request.client is not None else ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host or "unknown"
    if address.version == 6:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


class Attempts(Protocol):
    """A throttle's two moves, wherever its counts live."""

    async def take(self, key: str) -> int | None: ...

    async def give_back(self, key: str) -> None: ...


class LocalAttempts:
    """A `Throttle` in this process's memory."""

    def __init__(self, rate: Rate, clock: Callable[[], float]) -> None:
        self._throttle = Throttle(rate, clock=clock)

    async def take(self, key: str) -> int | None:
        return self._throttle.take(key)

    async def give_back(self, key: str) -> None:
        self._throttle.give_back(key)


class SignInGuard:
    def __init__(
        self,
        limits: SignInLimits,
        *,
        clock: Callable[[], float] = time.monotonic,
        shared: redis.Redis | None = None,
    ) -> None:
        self.limits = limits
        self.passwords = PasswordWork(limits.hashing_threads, limits.hashing_queue)
        self._shared: redis.Redis | None = None
        self._per_address: Attempts = LocalAttempts(limits.per_address, clock)
        self._per_account: Attempts = LocalAttempts(limits.per_account, clock)
        self._operator: Attempts = LocalAttempts(limits.operator_per_address, clock)
        if shared is not None:
            self.share(shared)

    def share(self, client: redis.Redis) -> None:
        """Count attempts in Redis from now on, with every process sharing `client`'s server."""
        if self._shared is client:
            return
        self._shared = client
        self._per_address = RedisThrottle(self.limits.per_address, client, "sign-in-address")
        self._per_account = RedisThrottle(self.limits.per_account, client, "sign-in-account")
        self._operator = RedisThrottle(self.limits.operator_per_address, client, "operator")

    async def admit(self, address: str, account: str | None = None) -> None:
        """Spend an attempt of `address` (a sign-up, or a sign-in to `account`: any email as
        typed, normalised, known or not); TooManyAttemptsError when either key has none."""
        wait = await self._per_address.take(address)
        if wait is None and account is not None:
            wait = await self._per_account.take(f"{address} {account}")
        if wait is not None:
            raise TooManyAttemptsError(wait)

    async def signed_in(self, address: str, account: str) -> None:
        """A right password is no guess: the account's attempt comes back."""
        await self._per_account.give_back(f"{address} {account}")

    async def admit_operator(self, address: str) -> None:
        wait = await self._operator.take(address)
        if wait is not None:
            raise TooManyAttemptsError(wait)


def guard(request: Request) -> SignInGuard:
    """The app's guard, counting in the service's Redis once the service has one."""
    found: SignInGuard = request.app.state.sign_in_guard
    limiter = request.app.state.services.platform.limiter
    shared = limiter.shared_redis() if limiter is not None else None
    if shared is not None:
        found.share(shared)
    return found
