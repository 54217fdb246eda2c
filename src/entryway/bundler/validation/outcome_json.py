"""A ValidationOutcome as JSON, so that one process's validation of an op can travel with the
op to another (the intake's API replica to the chain's bundler leader). Pure.

Ints are decimal strings (a stake or a prefund may exceed what a JSON number keeps exactly),
bytes 0x-prefixed hex. `outcome_from_json` raises `ValueError` on anything it cannot read, so
that a reader can fall back to validating the op again.
"""

from __future__ import annotations

import json
from typing import Any

from entryway.bundler.validation.outcome import ValidationData, ValidationOutcome
from entryway.bundler.validation.rules import StakeInfo


def outcome_to_json(outcome: ValidationOutcome) -> str:
    doc = {
        "preOpGas": str(outcome.pre_op_gas),
        "prefund": str(outcome.prefund),
        "account": _data_to_json(outcome.account),
        "paymaster": _data_to_json(outcome.paymaster),
        "paymasterContext": "0x" + outcome.paymaster_context.hex(),
        "senderStake": _stake_to_json(outcome.sender_stake),
        "factoryStake": _stake_to_json(outcome.factory_stake),
        "paymasterStake": _stake_to_json(outcome.paymaster_stake),
        "storageTouched": sorted(outcome.storage_touched),
        "codeHashes": [[address, "0x" + h.hex()] for address, h in outcome.code_hashes],
    }
    return json.dumps(doc, separators=(",", ":"))


def outcome_from_json(text: str) -> ValidationOutcome:
    try:
        doc = json.loads(text)
        return ValidationOutcome(
            pre_op_gas=_int(doc["preOpGas"]),
            prefund=_int(doc["prefund"]),
            account=_data_from_json(doc["account"]),
            paymaster=_data_from_json(doc["paymaster"]),
            paymaster_context=_bytes(doc["paymasterContext"]),
            sender_stake=_stake_from_json(doc["senderStake"]),
            factory_stake=_stake_from_json(doc["factoryStake"]),
            paymaster_stake=_stake_from_json(doc["paymasterStake"]),
            storage_touched=frozenset(_str(a) for a in doc["storageTouched"]),
            code_hashes=tuple((_str(a), _bytes(h)) for a, h in doc["codeHashes"]),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a validation outcome: {exc}") from None


def _data_to_json(data: ValidationData) -> dict[str, str]:
    return {
        "aggregator": str(data.aggregator),
        "validAfter": str(data.valid_after),
        "validUntil": str(data.valid_until),
    }


def _data_from_json(doc: Any) -> ValidationData:
    return ValidationData(_int(doc["aggregator"]), _int(doc["validAfter"]), _int(doc["validUntil"]))


def _stake_to_json(stake: StakeInfo) -> dict[str, str]:
    return {"stake": str(stake.stake), "unstakeDelaySec": str(stake.unstake_delay_s)}


def _stake_from_json(doc: Any) -> StakeInfo:
    return StakeInfo(_int(doc["stake"]), _int(doc["unstakeDelaySec"]))


def _int(value: Any) -> int:
    """A non-negative int, from a decimal or 0x-hex string."""
    text = _str(value)
    number = int(text, 16) if text.startswith(("0x", "0X")) else int(text, 10)
    if number < 0:
        raise ValueError(f"negative: {text}")
    return number


def _bytes(value: Any) -> bytes:
    text = _str(value)
    if not text.startswith("0x"):
        raise ValueError(f"not 0x-prefixed hex: {text[:20]}")
    return bytes.fromhex(text[2:])


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"not a string: {value!r}"[:80])
    return value
