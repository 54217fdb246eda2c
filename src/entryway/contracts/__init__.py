"""Compiled contracts shipped inside the package: Entryway's own, built from `contracts/` by
`make contracts`, and the EntryPoint v0.8, v0.7, v0.9 and v0.6 releases copied from their npm
packages (v0.7's named with a "V07" suffix, v0.9's with "V09", v0.6's with "V06")."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from entryway.contracts.abi import ContractAbi
from entryway.domain.evm import hex_to_bytes

ENTRYWAY_CONTRACTS = (
    "SmartAccount",
    "AccountFactory",
    "VerifyingPaymaster",
    "VerifyingPaymasterV06",
    "VerifyingPaymasterV07",
    "VerifyingPaymasterV09",
    "NotaryAnchor",
)
VENDORED_CONTRACTS = (
    "EntryPoint",
    "EntryPointSimulations",
    "SimpleAccount",
    "SimpleAccountFactory",
    "EntryPointV07",
    "EntryPointSimulationsV07",
    "SimpleAccountV07",
    "SimpleAccountFactoryV07",
    "EntryPointV06",
    "SimpleAccountV06",
    "SimpleAccountFactoryV06",
    "EntryPointV09",
    "EntryPointSimulationsV09",
    "SimpleAccountV09",
    "SimpleAccountFactoryV09",
)
SIMULATION_CONTRACTS = ("EntrywaySimulations",)
TEST_CONTRACTS = (
    "TestCounter",
    "TestGasPriceOracle",
    "TestStorage",
    "RuleHelper",
    "TestRulesAccount",
    "TestRulesPaymaster",
    "TestRulesFactory",
)


@dataclass(frozen=True)
class Artifact:
    name: str
    abi: ContractAbi
    raw_abi: list[dict[str, Any]]
    bytecode: bytes
    deployed_bytecode: bytes
    # {ast id: [{"start": offset, "length": n}, ...]} from solc, for immutables in runtime code.
    immutable_references: dict[str, list[dict[str, int]]]

    def immutable_ranges(self) -> list[tuple[int, int]]:
        if not self.immutable_references:
            return zero_push32_ranges(self.deployed_bytecode)
        return sorted(
            (ref["start"], ref["start"] + ref["length"])
            for refs in self.immutable_references.values()
            for ref in refs
        )

    def runtime_matches(self, code: bytes) -> bool:
        """Whether on-chain `code` is this artifact's runtime code, immutables aside."""
        if len(code) != len(self.deployed_bytecode):
            return False
        masked_chain, masked_artifact = bytearray(code), bytearray(self.deployed_bytecode)
        for start, end in self.immutable_ranges():
            masked_chain[start:end] = bytes(end - start)
            masked_artifact[start:end] = bytes(end - start)
        return masked_chain == masked_artifact


_PUSH1, _PUSH32 = 0x60, 0x7F


def zero_push32_ranges(code: bytes) -> list[tuple[int, int]]:
    """Where solc left immutables as placeholders: the operands of `PUSH32 0`.

    Used for published artifacts that carry no `immutableReferences`; the optimizer emits
    PUSH0 for a real zero, so a zero PUSH32 operand is a slot filled in at construction.
    """
    ranges, pc = [], 0
    while pc < len(code):
        op = code[pc]
        if _PUSH1 <= op <= _PUSH32:
            width = op - _PUSH1 + 1
            if op == _PUSH32 and code[pc + 1 : pc + 33] == bytes(32):
                ranges.append((pc + 1, pc + 33))
            pc += width
        pc += 1
    return ranges


@cache
def load(name: str) -> Artifact:
    path = resources.files(__package__).joinpath("artifacts", f"{name}.json")
    data = json.loads(path.read_text())
    return Artifact(
        name=data["contractName"],
        abi=ContractAbi(data["abi"]),
        raw_abi=data["abi"],
        bytecode=hex_to_bytes(data["bytecode"]),
        deployed_bytecode=hex_to_bytes(data["deployedBytecode"]),
        immutable_references=data.get("immutableReferences", {}),
    )
