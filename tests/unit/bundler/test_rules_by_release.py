"""ERC-7562 as each EntryPoint release's mempool knows it: v0.8 wants stake of a paymaster that
returns a context (EREP-050) and lets a staked factory cover any entity's touch of the new
sender's associated storage (STO-022); v0.7 allows the context, and its staked factory does not
cover an unstaked paymaster."""

from __future__ import annotations

import pytest

from entryway.bundler.validation.rules import Entities, RuleSettings, StakeInfo, check
from entryway.bundler.validation.trace import Phase, PhaseTrace, StorageAccess, ValidationTrace
from entryway.domain.entry_points import EntryPointVersion

EP = "0x" + "e1" * 20
SENDER = "0x" + "5e" * 20
FACTORY = "0x" + "fa" * 20
PAYMASTER = "0x" + "9a" * 20
EXTERNAL = "0x" + "77" * 20
STAKED = StakeInfo(10**18, 86_400)
UNSTAKED = StakeInfo(0, 0)
BASE = RuleSettings(min_stake_wei=10**18)


def entities(*, factory_stake: StakeInfo, paymaster_stake: StakeInfo) -> Entities:
    return Entities(EP, SENDER, FACTORY, PAYMASTER, UNSTAKED, factory_stake, paymaster_stake)


def paymaster_reads_sender_slot() -> ValidationTrace:
    """The paymaster reads the (not yet deployed) sender's slot in an external contract."""
    read = StorageAccess(EXTERNAL, int(SENDER, 16), write=False, transient=False)
    return ValidationTrace({Phase.PAYMASTER: PhaseTrace(Phase.PAYMASTER, storage=[read])}, [])


def rules(version: EntryPointVersion) -> list[str]:
    return [
        v.rule
        for v in check(
            paymaster_reads_sender_slot(),
            entities(factory_stake=STAKED, paymaster_stake=UNSTAKED),
            BASE.for_version(version),
        )
    ]


def test_staked_factory_covers_an_unstaked_paymaster_on_v08_only() -> None:
    assert rules(EntryPointVersion.V08) == []
    assert rules(EntryPointVersion.V09) == []  # v0.9's mempool keeps v0.8's rules
    assert rules(EntryPointVersion.V07) == ["STO-022"]
    assert rules(EntryPointVersion.V06) == ["STO-022"]


@pytest.mark.parametrize("version", list(EntryPointVersion))
def test_a_staked_paymaster_or_unstaked_factory_is_judged_alike(
    version: EntryPointVersion,
) -> None:
    settings = BASE.for_version(version)
    staked_pm = entities(factory_stake=STAKED, paymaster_stake=STAKED)
    assert check(paymaster_reads_sender_slot(), staked_pm, settings) == []
    unstaked_factory = entities(factory_stake=UNSTAKED, paymaster_stake=UNSTAKED)
    found = check(paymaster_reads_sender_slot(), unstaked_factory, settings)
    assert [v.rule for v in found] == ["STO-022"]


def test_an_unstaked_paymasters_context_is_refused_on_v08_and_v06() -> None:
    empty = ValidationTrace({}, [])
    who = entities(factory_stake=STAKED, paymaster_stake=UNSTAKED)
    v08 = check(empty, who, BASE.for_version(EntryPointVersion.V08), b"\x01")
    v07 = check(empty, who, BASE.for_version(EntryPointVersion.V07), b"\x01")
    v06 = check(empty, who, BASE.for_version(EntryPointVersion.V06), b"\x01")
    assert [v.rule for v in v08] == [v.rule for v in v06] == ["EREP-050"]
    assert v07 == []
    v09 = check(empty, who, BASE.for_version(EntryPointVersion.V09), b"\x01")
    assert [v.rule for v in v09] == ["EREP-050"]
