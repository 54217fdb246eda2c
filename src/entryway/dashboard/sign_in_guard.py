"""What stands before a password or the operator token is checked: throttles per client
address and per (client address, account), and the bounded hashing of `PasswordWork`.

No account is ever locked as such: an account guessed at from one address stays open to its
owner at another, and the answers are the same whether the account exists or not (an unknown
email is throttled by the same keys and verified against a dummy hash). The counts live in
this process's memory: behind several API processes each keeps its own."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fastapi import Request

from entryway.dashboard.passwords import PasswordWork
from entryway.domain.throttle import Rate, Throttle
from entryway.errors import EntrywayError


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


class SignInGuard:
    def __init__(
        self, limits: SignInLimits, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits
        self.passwords = PasswordWork(limits.hashing_threads, limits.hashing_queue)
        self._per_address = Throttle(limits.per_address, clock=clock)
        self._per_account = Throttle(limits.per_account, clock=clock)
        self._operator = Throttle(limits.operator_per_address, clock=clock)

    def admit(self, address: str, account: str | None = None) -> None:
        """Spend an attempt of `address` (a sign-up, or a sign-in to `account`: any email as
        typed, normalised, known or not); TooManyAttemptsError when either key has none."""
        wait = self._per_address.take(address)
        if wait is None and account is not None:
            wait = self._per_account.take((address, account))
        if wait is not None:
            raise TooManyAttemptsError(wait)

    def signed_in(self, address: str, account: str) -> None:
        """A right password is no guess: the account's attempt comes back."""
        self._per_account.give_back((address, account))

    def admit_operator(self, address: str) -> None:
        wait = self._operator.take(address)
        if wait is not None:
            raise TooManyAttemptsError(wait)


def guard(request: Request) -> SignInGuard:
    found: SignInGuard = request.app.state.sign_in_guard
    return found
