"""Bundles sized by the block: a share of its gas limit, more than 64 ops when it has room,
left-out ops first in line for the next bundle; and the operator's trusted entities."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from eth_account import Account
from typer.testing import CliRunner

from entryway.bundler.bundling import (
    BUNDLE_OVERHEAD_GAS,
    BundleLimits,
    block_gas_share_percent,
    select_bundle,
)
from entryway.bundler.errors import BundlerError
from entryway.bundler.mempool import Mempool, MempoolEntry
from entryway.bundler.reputation import Reputation, ReputationStatus
from entryway.cli import app
from entryway.settings.commands import CONFIG_EXIT
from tests.unit.bundler.test_mempool_and_bundling import GWEI, PM, entry

BLOCK = 30_000_000
FACTORY = "0x7777777777777777777777777777777777777777"


def numbered(entries: list[MempoolEntry]) -> list[MempoolEntry]:
    for seq, e in enumerate(entries):
        e.sequence = seq
    return entries


def bundle_gas(chosen: list[MempoolEntry]) -> int:
    return BUNDLE_OVERHEAD_GAS + sum(e.max_gas for e in chosen)


def with_factory(e: MempoolEntry) -> MempoolEntry:
    e.op = replace(e.op, factory=FACTORY, factory_data=b"\x01")
    return e


def test_a_bundle_carries_more_than_64_ops_when_the_block_has_room() -> None:
    entries = numbered([entry(i + 1, gas=50_000) for i in range(300)])  # 150,000 gas each
    limits = BundleLimits(block_gas_share_percent=90)
    budget = limits.gas_budget(BLOCK)
    chosen = select_bundle(entries, base_fee=GWEI, reputation=Reputation(), max_bundle_gas=budget)
    assert len(chosen) == (budget - BUNDLE_OVERHEAD_GAS) // 150_000 > 64
    assert bundle_gas(chosen) <= budget


@pytest.mark.parametrize("share", [1, 10, 25, 50, 100])
def test_a_bundle_never_exceeds_its_share_of_the_block(share: int) -> None:
    entries = numbered([entry(i + 1, gas=40_000 + 7_000 * (i % 5)) for i in range(400)])
    limits = BundleLimits(block_gas_share_percent=share)
    budget = limits.gas_budget(BLOCK)
    assert budget == BLOCK * share // 100
    chosen = select_bundle(entries, base_fee=GWEI, reputation=Reputation(), max_bundle_gas=budget)
    assert chosen and bundle_gas(chosen) <= budget
    # What is left for a second bundle in the same block fits in the block with the first.
    second = limits.gas_budget(BLOCK, used_in_block=bundle_gas(chosen))
    assert second == min(budget, BLOCK - bundle_gas(chosen))


def test_the_block_budget_is_never_negative() -> None:
    assert BundleLimits(block_gas_share_percent=50).gas_budget(BLOCK, BLOCK + 1) == 0


def test_each_chain_has_a_default_share_and_the_settings_win() -> None:
    assert block_gas_share_percent(1) == 25
    assert block_gas_share_percent(8453) == 50
    assert block_gas_share_percent(31337) == 90
    assert block_gas_share_percent(1, 60) == 60


def test_ops_left_out_keep_their_place_oldest_first_within_fee_order() -> None:
    # Two fee levels, arrival order interleaved; the block has room for 5 at a time.
    entries = numbered(
        [entry(i + 1, tip=(3 if i % 3 == 0 else 1) * GWEI, gas=50_000) for i in range(12)]
    )
    expected = sorted(entries, key=lambda e: (-e.op.max_priority_fee_per_gas, e.sequence))
    waiting, bundles = list(entries), []
    while waiting:
        chosen = select_bundle(
            waiting,
            base_fee=GWEI,
            reputation=Reputation(),
            max_bundle_gas=BUNDLE_OVERHEAD_GAS + 5 * 150_000,
        )
        assert len(chosen) == min(5, len(waiting))
        bundles.append(chosen)
        waiting = [e for e in waiting if e not in chosen]
    assert [e for b in bundles for e in b] == expected


def test_a_trusted_factory_is_not_throttled_while_a_strangers_is() -> None:
    stranger, trusted = Reputation(), Reputation(trusted=[FACTORY.upper().replace("X", "x")])
    for rep in (stranger, trusted):
        rep.set(FACTORY, 200, 0)  # 200 first-time accounts, none included yet
    assert stranger.status(FACTORY) is ReputationStatus.THROTTLED
    assert trusted.status(FACTORY) is ReputationStatus.OK
    entries = numbered([with_factory(entry(i + 1)) for i in range(20)])
    capped = select_bundle(entries, base_fee=GWEI, reputation=stranger, max_bundle_gas=BLOCK)
    assert len(capped) == 4  # THROTTLED_ENTITY_BUNDLE_COUNT
    assert select_bundle(entries, base_fee=GWEI, reputation=trusted, max_bundle_gas=BLOCK) == (
        entries
    )
    # Banned-level counts too: a trusted entity still goes in.
    trusted.set(FACTORY, 10_000, 0)
    assert trusted.status(FACTORY) is ReputationStatus.OK


def test_a_throttled_strangers_factory_is_held_to_four_mempool_ops() -> None:
    stranger, trusted = Reputation(), Reputation(trusted=[FACTORY])
    for rep in (stranger, trusted):
        rep.set(FACTORY, 200, 0)
    strangers_pool, trusted_pool = Mempool(stranger), Mempool(trusted)
    for i in range(4):
        strangers_pool.add(with_factory(entry(i + 1)))
    with pytest.raises(BundlerError) as info:
        strangers_pool.add(with_factory(entry(5)))
    assert "throttled" in info.value.message
    for i in range(30):
        trusted_pool.add(with_factory(entry(i + 1)))
    assert len(trusted_pool) == 30


def test_a_trusted_unstaked_paymaster_is_not_held_to_the_unstaked_allowance() -> None:
    pool = Mempool(Reputation(trusted=[PM]))
    for i in range(25):
        pool.add(entry(i + 1, paymaster=PM, pm_staked=False))
    assert len(pool) == 25


def test_the_standalone_bundler_refuses_a_bad_share_or_trusted_entity(tmp_path: Path) -> None:
    keys = tmp_path / "executor.key"
    keys.write_text(Account.create().key.hex())
    base = ["bundler", "--rpc-url", "http://127.0.0.1:9", "--executor-key-file", str(keys)]
    bad_address = CliRunner().invoke(app, [*base, "--trusted-entity", "0x12"])
    assert bad_address.exit_code == CONFIG_EXIT
    assert "--trusted-entity takes a 20-byte hex address" in bad_address.output
    for share in ("0", "101"):
        refused = CliRunner().invoke(app, [*base, "--block-gas-share", share])
        assert refused.exit_code == 2 and "block-gas-share" in refused.output
