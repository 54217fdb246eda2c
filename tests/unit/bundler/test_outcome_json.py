"""A validation outcome survives its JSON form exactly; anything else is refused with
ValueError (the leader then validates the op again)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from entryway.bundler.validation.outcome import ValidationData, ValidationOutcome
from entryway.bundler.validation.outcome_json import outcome_from_json, outcome_to_json
from entryway.bundler.validation.rules import StakeInfo

uint256 = st.integers(min_value=0, max_value=2**256 - 1)
uint48 = st.integers(min_value=0, max_value=2**48 - 1)
address = st.binary(min_size=20, max_size=20).map(lambda b: "0x" + b.hex())
data = st.builds(ValidationData, st.integers(0, 2**160 - 1), uint48, uint48)
stake = st.builds(StakeInfo, uint256, st.integers(0, 2**32 - 1))
outcomes = st.builds(
    ValidationOutcome,
    pre_op_gas=uint256,
    prefund=uint256,
    account=data,
    paymaster=data,
    paymaster_context=st.binary(max_size=200),
    sender_stake=stake,
    factory_stake=stake,
    paymaster_stake=stake,
    storage_touched=st.frozensets(address, max_size=5),
    code_hashes=st.lists(st.tuples(address, st.binary(min_size=32, max_size=32))).map(tuple),
)


@given(outcomes)
def test_an_outcome_round_trips_through_json(outcome: ValidationOutcome) -> None:
    assert outcome_from_json(outcome_to_json(outcome)) == outcome


SMALL = ValidationOutcome(
    1, 2, ValidationData(0, 0, 2**48 - 1), ValidationData(0, 5, 9), b"\x01",
    StakeInfo(10**18, 86_400), StakeInfo(0, 0), StakeInfo(0, 0),
)  # fmt: skip


def test_hex_ints_are_read_too() -> None:
    text = outcome_to_json(SMALL).replace('"preOpGas":"1"', '"preOpGas":"0x1"')
    assert outcome_from_json(text) == SMALL


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{not json",
        "[]",
        '"a string"',
        "{}",
        '{"preOpGas": 1}',
        outcome_to_json(SMALL).replace('"prefund":"2"', '"prefund":"-2"'),
        outcome_to_json(SMALL).replace('"prefund":"2"', '"prefund":2'),
        outcome_to_json(SMALL).replace('"paymasterContext":"0x01"', '"paymasterContext":"zz"'),
        outcome_to_json(SMALL).replace('"codeHashes":[]', '"codeHashes":[["0x1"]]'),
    ],
)
def test_anything_else_is_refused_with_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        outcome_from_json(text)
