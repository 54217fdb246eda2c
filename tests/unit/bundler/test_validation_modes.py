"""The validation modes' rule table: docs/bundler.md prints what the code enforces, and the
choice between modes follows what the node serves and what the settings pin."""

from __future__ import annotations

from pathlib import Path

import pytest

from entryway.bundler.validation.modes import (
    CALLS,
    NATIVE,
    OPCODES,
    UNTRACED,
    NodeTracing,
    choose_mode,
    enforced_by,
    parse_mode,
    rules_table,
    unchecked_by,
)
from entryway.errors import ConfigurationError

DOCS = Path(__file__).parents[3] / "docs" / "bundler.md"


def test_the_documented_rule_table_is_the_codes() -> None:
    assert rules_table() in DOCS.read_text()


def test_the_complete_modes_enforce_every_rule_and_untraced_only_what_simulation_shows() -> None:
    assert unchecked_by(NATIVE) == unchecked_by(OPCODES) == ()
    assert set(enforced_by(UNTRACED)) == {"EREP-050", "SREP/UREP/EREP"}
    # calls mode cannot see opcodes: the environment bans beyond CREATE, GAS, BALANCE
    assert set(unchecked_by(CALLS)) == {"OP-012", "OP-051", "OP-070", "OP-080"}
    assert {"OP-061", "STO-021", "COD-010"} <= set(enforced_by(CALLS))


def test_the_strongest_served_mode_is_chosen_unless_one_is_pinned() -> None:
    hosted = NodeTracing(frozenset({CALLS, UNTRACED}), ("native: no", "opcodes: no"))
    assert choose_mode(hosted, None, where="chain 1") is CALLS
    assert choose_mode(hosted, UNTRACED, where="chain 1") is UNTRACED
    with pytest.raises(ConfigurationError, match=r"opcodes is pinned.*opcodes: no.*calls at most"):
        choose_mode(hosted, OPCODES, where="chain 1")


@pytest.mark.parametrize("value", [None, "auto"])
def test_auto_leaves_the_choice_to_the_node(value: str | None) -> None:
    assert parse_mode(value) is None


def test_an_unknown_mode_names_the_choices() -> None:
    assert parse_mode("calls") is CALLS
    with pytest.raises(ConfigurationError, match="choose one of auto, native, opcodes"):
        parse_mode("tracing")


def test_calls_mode_is_served_only_where_the_probes_override_ran() -> None:
    """A node that ignored the probe's state override (Hardhat's debug_traceCall does) traced
    an empty account: the replay could not run there either."""
    from entryway.bundler.validation.modes import _PROBE_ADDRESS, _PROBE_CODE, _calls_ok

    call = {"type": "CALL", "to": _PROBE_ADDRESS}
    assert _calls_ok(call, {_PROBE_ADDRESS: {"balance": "0x0", "code": _PROBE_CODE}})
    assert not _calls_ok(call, {_PROBE_ADDRESS: {"balance": "0x0"}})
