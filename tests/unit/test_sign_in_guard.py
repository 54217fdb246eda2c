"""The limits before a password is checked: token buckets per key (on a clock the test moves),
the bounded argon2 work (real hashes on real threads), and the guard that keys them by
client address and by (client address, account)."""

from __future__ import annotations

import asyncio

import pytest
from starlette.requests import Request

from entryway.dashboard.passwords import PasswordWork, PasswordWorkBusyError
from entryway.dashboard.sign_in_guard import (
    SignInGuard,
    SignInLimits,
    TooManyAttemptsError,
    client_address,
)
from entryway.domain.throttle import Rate, Throttle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_key_gets_its_burst_then_waits_for_the_refill() -> None:
    clock = Clock()
    throttle = Throttle(Rate(3, 60), clock=clock)
    assert [throttle.take("a") for _ in range(3)] == [None, None, None]
    assert throttle.take("a") == 20  # one attempt every 60/3 s
    clock.now += 15
    assert throttle.take("a") == 5
    clock.now += 5
    assert throttle.take("a") is None
    assert throttle.take("b") is None  # another key has its own bucket


def test_a_refused_attempt_costs_nothing_and_the_bucket_never_exceeds_its_burst() -> None:
    clock = Clock()
    throttle = Throttle(Rate(2, 10), clock=clock)
    throttle.take("a")
    throttle.take("a")
    for _ in range(10):
        assert throttle.take("a") == 5
    clock.now += 3600
    assert [throttle.take("a") for _ in range(3)] == [None, None, 5]


def test_an_attempt_given_back_can_be_spent_again_up_to_the_burst() -> None:
    throttle = Throttle(Rate(1, 60), clock=Clock())
    assert throttle.take("a") is None
    throttle.give_back("a")
    assert throttle.take("a") is None
    assert throttle.take("a") == 60
    throttle.give_back("a")
    throttle.give_back("a")
    assert throttle.take("a") is None
    assert throttle.take("a") is not None


def test_the_keys_kept_are_bounded_and_the_longest_idle_goes_first() -> None:
    throttle = Throttle(Rate(1, 60), clock=Clock(), max_keys=2)
    throttle.take("a")
    throttle.take("b")
    throttle.take("a")  # a is the most recent now
    throttle.take("c")  # b goes
    assert throttle.take("a") is not None
    assert throttle.take("b") is None


def test_a_rate_needs_an_attempt_and_a_period() -> None:
    with pytest.raises(ValueError):
        Rate(0, 60)
    with pytest.raises(ValueError):
        Rate(1, 0)


async def test_hashing_runs_at_most_threads_plus_queue_and_refuses_the_rest_at_once() -> None:
    work = PasswordWork(threads=1, queue=2)
    stored = await work.hash("correct horse battery staple")
    work.hashed = 0
    answers = await asyncio.gather(
        *(work.verify(stored, f"guess {n}") for n in range(20)), return_exceptions=True
    )
    refused = [a for a in answers if isinstance(a, PasswordWorkBusyError)]
    assert len(refused) == 17
    assert answers.count(False) == 3
    assert work.hashed == 3
    assert work.admitted == 0
    assert await work.verify(stored, "correct horse battery staple")  # the queue is free again


async def test_hashing_leaves_the_event_loop_free() -> None:
    work = PasswordWork(threads=1, queue=0)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    try:
        await work.hash("correct horse battery staple")
    finally:
        ticker.cancel()
    assert ticks > 5  # argon2 ran in a thread while the loop went round


async def test_an_unknown_account_is_verified_against_a_dummy_hash_and_never_matches() -> None:
    work = PasswordWork()
    assert not await work.verify(None, "no account has this password")
    assert not await work.verify(None, "")
    assert work.hashed == 2


async def test_one_address_guessing_an_account_leaves_it_open_from_another() -> None:
    guard = SignInGuard(SignInLimits(per_address=Rate(100, 60), per_account=Rate(5, 900)))
    for _ in range(5):
        await guard.admit("203.0.113.9", "alice@example.com")
    with pytest.raises(TooManyAttemptsError) as refused:
        await guard.admit("203.0.113.9", "alice@example.com")
    assert refused.value.retry_after_s == 180
    await guard.admit("198.51.100.7", "alice@example.com")  # alice, at home
    await guard.admit("203.0.113.9", "bob@example.com")


async def test_known_and_unknown_accounts_are_throttled_alike() -> None:
    guard = SignInGuard(SignInLimits(per_address=Rate(100, 60), per_account=Rate(3, 60)))

    async def refused_after(account: str) -> int:
        for n in range(10):
            try:
                await guard.admit("203.0.113.9", account)
            except TooManyAttemptsError:
                return n
        return 10

    known, unknown = (
        await refused_after("known@example.com"),
        await refused_after("nobody@example.com"),
    )
    assert known == unknown == 3


async def test_an_address_is_bounded_over_every_account_and_the_operator_token_apart() -> None:
    limits = SignInLimits(
        per_address=Rate(4, 60), per_account=Rate(5, 900), operator_per_address=Rate(2, 60)
    )
    guard = SignInGuard(limits)
    for n in range(4):
        await guard.admit("203.0.113.9", f"user{n}@example.com")
    with pytest.raises(TooManyAttemptsError):
        await guard.admit("203.0.113.9", "user9@example.com")
    with pytest.raises(TooManyAttemptsError):
        await guard.admit("203.0.113.9")  # a sign-up from there too
    await guard.admit_operator("203.0.113.9")
    await guard.admit_operator("203.0.113.9")
    with pytest.raises(TooManyAttemptsError) as refused:
        await guard.admit_operator("203.0.113.9")
    assert refused.value.retry_after_s == 30
    await guard.admit_operator("198.51.100.7")


async def test_a_right_password_gives_the_accounts_attempt_back() -> None:
    guard = SignInGuard(SignInLimits(per_address=Rate(100, 60), per_account=Rate(2, 900)))
    for _ in range(10):
        await guard.admit("203.0.113.9", "alice@example.com")
        await guard.signed_in("203.0.113.9", "alice@example.com")


def request_from(host: str | None) -> Request:
    client = None if host is None else (host, 40000)
    return Request({"type": "http", "method": "POST", "path": "/", "headers": [], "client": client})


def test_a_client_is_counted_by_its_address_and_an_ipv6_one_by_its_64() -> None:
    assert client_address(request_from("203.0.113.9")) == "203.0.113.9"
    assert client_address(request_from("2001:db8:1:2:aaaa::1")) == "2001:db8:1:2::/64"
    assert client_address(request_from("2001:db8:1:2:bbbb::7")) == "2001:db8:1:2::/64"
    assert client_address(request_from(None)) == "unknown"


async def test_a_cancelled_check_keeps_its_thread_counted_until_the_hash_is_done() -> None:
    work = PasswordWork(threads=1, queue=0)
    first = asyncio.create_task(work.hash("correct horse battery staple"))
    await asyncio.sleep(0.005)  # the hash is running in its thread
    first.cancel()
    await asyncio.sleep(0)
    with pytest.raises(PasswordWorkBusyError):
        await work.hash("another password entirely")  # the abandoned hash still runs
    with pytest.raises(asyncio.CancelledError):
        await first
    assert work.admitted == 0
    await work.hash("another password entirely")
