from __future__ import annotations

from dataclasses import replace

import pytest

from entryway.bundler.bundling import select_bundle
from entryway.bundler.errors import BundlerError, RpcErrorCode
from entryway.bundler.mempool import Mempool, MempoolEntry
from entryway.bundler.reputation import Reputation
from entryway.bundler.validation.outcome import ValidationData, ValidationOutcome
from entryway.bundler.validation.rules import StakeInfo
from entryway.domain.userop import UserOperation

PM = "0x9999999999999999999999999999999999999999"
FACTORY = "0x8888888888888888888888888888888888888888"
GWEI = 10**9
BLOCK = 30_000_000


def sender(i: int) -> str:
    return "0x" + f"{i:040x}"


def outcome(touched: frozenset[str] = frozenset()) -> ValidationOutcome:
    blank = ValidationData.unpack(0)
    zero = StakeInfo(0, 0)
    return ValidationOutcome(0, 0, blank, blank, b"", zero, zero, zero, touched)


def entry(
    i: int, nonce: int = 0, tip: int = GWEI, gas: int = 100_000, **kw: object
) -> MempoolEntry:
    op = UserOperation(
        sender=sender(i),
        nonce=nonce,
        call_data=b"",
        call_gas_limit=gas,
        verification_gas_limit=gas,
        pre_verification_gas=50_000,
        max_fee_per_gas=tip + 10 * GWEI,
        max_priority_fee_per_gas=tip,
        paymaster=kw.get("paymaster"),  # type: ignore[arg-type]
        factory=kw.get("factory"),  # type: ignore[arg-type]
    )
    return MempoolEntry(
        op=op,
        user_op_hash=bytes([i % 256, nonce % 256]) + bytes(30),
        outcome=kw.get("outcome", outcome()),  # type: ignore[arg-type]
        sender_staked=bool(kw.get("staked", False)),
        factory_staked=bool(kw.get("factory_staked", False)),
        paymaster_staked=bool(kw.get("pm_staked", True)),
        received_at=0.0,
        received_block=0,
    )


def test_replacement_rule_is_ten_percent_on_both_fees() -> None:
    pool = Mempool(Reputation())
    first = entry(1)
    pool.add(first)
    cheap = replace(first, user_op_hash=b"\x01" * 32)
    cheap.op = replace(first.op, max_fee_per_gas=first.op.max_fee_per_gas * 2)
    with pytest.raises(BundlerError):
        pool.add(cheap)  # the tip did not move
    better = replace(first, user_op_hash=b"\x02" * 32)
    better.op = replace(
        first.op,
        max_fee_per_gas=first.op.max_fee_per_gas * 11 // 10,
        max_priority_fee_per_gas=first.op.max_priority_fee_per_gas * 11 // 10,
    )
    assert pool.add(better) is first
    assert [e.user_op_hash for e in pool.entries()] == [b"\x02" * 32]


def test_unstaked_sender_limit_and_staked_exemption() -> None:
    """UREP-010: the fifth op of an unstaked sender wants stake (-32505), as the reference
    bundler answers it; a staked sender is not counted."""
    pool = Mempool(Reputation())
    for nonce in range(4):
        pool.add(entry(1, nonce))
    with pytest.raises(BundlerError) as info:
        pool.add(entry(1, 4))
    assert info.value.code is RpcErrorCode.STAKE_TOO_LOW
    assert f"unstaked sender {sender(1)}" in info.value.message
    for nonce in range(6):
        pool.add(entry(2, nonce, staked=True))
    assert len(pool) == 10


def test_unstaked_paymaster_limit() -> None:
    pool = Mempool(Reputation())
    for i in range(10):
        pool.add(entry(i + 1, paymaster=PM, pm_staked=False))
    with pytest.raises(BundlerError) as info:
        pool.add(entry(50, paymaster=PM, pm_staked=False))
    assert info.value.code is RpcErrorCode.STAKE_TOO_LOW
    assert "unstaked paymaster" in info.value.message


def test_unstaked_factory_limit() -> None:
    """UREP-020 holds an unstaked factory to the same allowance as an unstaked paymaster: ten
    first-time accounts pending through one factory that has none mined; a staked one is
    not counted."""
    pool = Mempool(Reputation())
    for i in range(10):
        pool.add(entry(i + 1, factory=FACTORY))
    with pytest.raises(BundlerError) as info:
        pool.add(entry(50, factory=FACTORY))
    assert info.value.code is RpcErrorCode.STAKE_TOO_LOW
    assert f"unstaked factory {FACTORY}" in info.value.message
    staked = "0x7777777777777777777777777777777777777777"
    for i in range(12):
        pool.add(entry(i + 100, factory=staked, factory_staked=True))
    assert len(pool) == 22


def test_unstaked_allowance_counts_the_inclusion_rate_and_ops_included() -> None:
    """UREP-020 with the conformance suite's numbers: one op included of ten seen, each op
    admitted counted as seen (as the bundler counts it), leaves room for eleven ops: 10 +
    floor(1/11 * 10) + min(1, 10000) once the first is in."""
    rep = Reputation()
    rep.set(PM, ops_seen=10, ops_included=1)
    pool = Mempool(rep)
    for i in range(11):
        pool.add(entry(i + 1, paymaster=PM, pm_staked=False))
        rep.seen(PM)
    with pytest.raises(BundlerError) as info:
        pool.add(entry(50, paymaster=PM, pm_staked=False))
    assert info.value.code is RpcErrorCode.STAKE_TOO_LOW
    assert len(pool) == 11


def test_throttled_sender_is_refused_as_throttled() -> None:
    """SREP-030: a throttled sender may have THROTTLED_ENTITY_MEMPOOL_COUNT ops pending, and
    its next is refused as throttled (-32504), not by the unstaked sender's count that falls
    at the same number; a staked sender, exempt from that count, is held to it too."""
    rep = Reputation()
    pool = Mempool(rep)
    for i, staked in ((1, False), (2, True)):
        rep.set(sender(i), ops_seen=120, ops_included=1)  # 12 > 1 + 10: throttled
        for nonce in range(4):
            pool.add(entry(i, nonce, staked=staked))
        with pytest.raises(BundlerError) as info:
            pool.add(entry(i, 4, staked=staked))
        assert info.value.code is RpcErrorCode.BANNED_OR_THROTTLED
        assert f"sender {sender(i)} is throttled" in info.value.message
    assert len(pool) == 8


def bumped(e: MempoolEntry, op_hash: bytes, **changes: object) -> MempoolEntry:
    """The same sender and nonce at twice the fees: a valid replacement of `e`."""
    again = replace(e, user_op_hash=op_hash, **changes)  # type: ignore[arg-type]
    again.op = replace(
        e.op,
        max_fee_per_gas=e.op.max_fee_per_gas * 2,
        max_priority_fee_per_gas=e.op.max_priority_fee_per_gas * 2,
    )
    return again


def test_a_replacement_frees_only_the_places_of_the_op_it_replaces() -> None:
    """A replacement leaves the entity count of the op it replaces: it may keep an unstaked
    paymaster's last place, but an op that named no paymaster frees none of its places."""
    pool = Mempool(Reputation())
    for i in range(10):
        pool.add(entry(i + 1, paymaster=PM, pm_staked=False))
    plain = entry(11)
    pool.add(plain)
    assert pool.add(bumped(pool.for_sender(sender(1))[0], b"\x03" * 32)) is not None
    naming = bumped(plain, b"\x04" * 32, paymaster_staked=False)
    naming.op = replace(naming.op, paymaster=PM)
    with pytest.raises(BundlerError) as info:
        pool.add(naming)
    assert "unstaked paymaster" in info.value.message


def test_bundle_takes_one_op_per_sender_by_tip_within_gas() -> None:
    entries = [
        entry(1, 0, tip=GWEI),
        entry(1, 1, tip=5 * GWEI),
        entry(2, tip=3 * GWEI),
        entry(3, tip=2 * GWEI),
    ]
    for seq, e in enumerate(entries):
        e.sequence = seq
    chosen = select_bundle(entries, base_fee=GWEI, reputation=Reputation(), max_bundle_gas=BLOCK)
    assert [(e.op.sender, e.op.nonce) for e in chosen] == [
        (sender(2), 0),
        (sender(3), 0),
        (sender(1), 0),
    ]
    small = select_bundle(entries, base_fee=GWEI, reputation=Reputation(), max_bundle_gas=600_000)
    assert len(small) == 2


def test_bundle_skips_ops_that_touch_another_senders_storage() -> None:
    first = entry(1)
    reader = entry(2, outcome=outcome(frozenset({sender(1)})))
    reader.sequence = 1
    chosen = select_bundle(
        [first, reader], base_fee=GWEI, reputation=Reputation(), max_bundle_gas=BLOCK
    )
    assert chosen == [first]  # STO-041


def test_throttled_paymaster_is_capped_per_bundle() -> None:
    rep = Reputation()
    rep.set(PM, 150, 0)
    entries = [entry(i + 1, paymaster=PM) for i in range(8)]
    chosen = select_bundle(entries, base_fee=GWEI, reputation=rep, max_bundle_gas=BLOCK)
    assert len(chosen) == 4
    rep.set(PM, 10_000, 0)
    assert select_bundle(entries, base_fee=GWEI, reputation=rep, max_bundle_gas=BLOCK) == []


def test_ops_below_the_base_fee_wait() -> None:
    e = entry(1)
    assert (
        select_bundle(
            [e], base_fee=e.op.max_fee_per_gas + 1, reputation=Reputation(), max_bundle_gas=BLOCK
        )
        == []
    )


def test_stale_expiring_and_lingering_throttled_ops_are_dropped() -> None:
    rep = Reputation()
    pool = Mempool(rep)
    fresh = entry(1)
    fresh.received_at = 1_000.0
    old = entry(2)
    old.received_at = 10.0
    expiring = entry(3)
    expiring.outcome = replace(outcome(), account=ValidationData(0, 0, 2_000_010))
    expiring.received_at = 1_000.0
    throttled = entry(4, paymaster=PM)
    throttled.received_at = 1_000.0
    for e in (fresh, old, expiring, throttled):
        pool.add(e)
    rep.set(PM, 150, 0)  # throttled
    dropped = pool.expire(now=2_000_000, block=5, received_before=100.0)
    assert {e.op.sender for e, _ in dropped} == {sender(2), sender(3)}
    dropped = pool.expire(now=2_000_000, block=11, received_before=100.0)
    assert [e.op.sender for e, _ in dropped] == [sender(4)]
    assert [e.op.sender for e in pool.entries()] == [sender(1)]


def test_ops_whose_v09_block_range_ended_are_dropped() -> None:
    """EntryPoint v0.9 bounds with the block-range flag are block numbers: the op goes when
    the next block would fall after its range, whatever the time."""
    flag = 0x800000000000
    in_blocks = ValidationData(0, flag | 3, flag | 20)
    assert in_blocks.block_range() == (3, 20)
    assert ValidationData(0, 3, flag | 20).block_range() is None  # both bounds, or none
    pool = Mempool(Reputation())
    ranged = entry(1)
    ranged.received_at = 1_000.0
    ranged.outcome = replace(outcome(), paymaster=in_blocks)
    pool.add(ranged)
    assert pool.expire(now=2_000_000, block=19, received_before=100.0) == []
    [(dropped, reason)] = pool.expire(now=2_000_000, block=20, received_before=100.0)
    assert dropped.op.sender == sender(1) and reason == "expired at block 20"
