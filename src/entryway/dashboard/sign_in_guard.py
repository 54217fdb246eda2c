"""What stands before a password or the operator token is checked: throttles per client
address and per (client address, account), and the bounded hashing of `PasswordWork`.

No account is ever locked as such: an account guessed at from one address stays open to its
owner at another, and the answers are the same whether the account exists or not (an unknown
email is throttled by the same keys and verified against a dummy hash). The counts live in
Redis when the service has one (`redis_url`), shared by every API process; otherwise, and
while that Redis does not answer (`shared_redis`), in this process's memory."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from fastapi import Request

from entryway.dashboard.passwords import PasswordWork
from entryway.domain.throttle import Rate, Throttle
from entryway.errors import EntrywayError
from entryway.service.shared_redis import NOT_COUNTED, SharedRedis
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


class SharedAttempts:
    """Attempts counted in Redis, or in this process's memory while Redis does not answer."""

    def __init__(self, shared: SharedRedis, remote: RedisThrottle, local: Attempts) -> None:
        self._shared = shared
        self._remote = remote
        self._local = local

    async def take(self, key: str) -> int | None:
        if not self._shared.down:
            try:
                return await self._remote.take(key)
            except NOT_COUNTED as exc:
                self._shared.failed(exc)
        return await self._local.take(key)

    async def give_back(self, key: str) -> None:
        if not self._shared.down:
            try:
                await self._remote.give_back(key)
                return
            except NOT_COUNTED as exc:
                self._shared.failed(exc)
        await self._local.give_back(key)


class SignInGuard:
    def __init__(
        self,
        limits: SignInLimits,
        *,
        clock: Callable[[], float] = time.monotonic,
        shared: SharedRedis | None = None,
    ) -> None:
        self.limits = limits
        self.passwords = PasswordWork(limits.hashing_threads, limits.hashing_queue)
        self._shared: SharedRedis | None = None
        self._per_address: Attempts = LocalAttempts(limits.per_address, clock)
        self._per_account: Attempts = LocalAttempts(limits.per_account, clock)
        self._operator: Attempts = LocalAttempts(limits.operator_per_address, clock)
        if shared is not None:
            self.share(shared)

    def share(self, shared: SharedRedis) -> None:
        """Count attempts in Redis from now on, with every process sharing that server (in
        this process's memory, as before, while it does not answer)."""
        if self._shared is shared:
            return
        self._shared = shared

        def attempts(local: Attempts, rate: Rate, name: str) -> Attempts:
            return SharedAttempts(shared, RedisThrottle(rate, shared.client, name), local)

        limits = self.limits
        self._per_address = attempts(self._per_address, limits.per_address, "sign-in-address")
        self._per_account = attempts(self._per_account, limits.per_account, "sign-in-account")
        self._operator = attempts(self._operator, limits.operator_per_address, "operator")

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
    shared = limiter.shared if limiter is not None else None
    if shared is not None:
        found.share(shared)
    return found
