"""A UserOperation as the service stores it inside its own records (task payloads, a
recovery's submitted op): the ERC-4337 v0.8 JSON form, hex quantities and data.

This reads back what the service wrote itself. Clients' JSON is parsed strictly, with
JSON-RPC errors, by the bundler's wire layer (`bundler.rpc_types`), which writes the same
form, so either reads what the other wrote.
"""

from __future__ import annotations

from typing import Any

from entryway.domain.eip7702 import MARKER, Authorization
from entryway.domain.evm import checksum
from entryway.domain.userop import UserOperation

EIP7702_FACTORY = "0x7702"  # how the JSON form spells the EIP-7702 marker
ZERO_ADDRESS = "0x" + "00" * 20


def op_to_json(op: UserOperation) -> dict[str, Any]:
    out: dict[str, Any] = {
        "sender": op.sender,
        "nonce": hex(op.nonce),
        "callData": "0x" + op.call_data.hex(),
        "callGasLimit": hex(op.call_gas_limit),
        "verificationGasLimit": hex(op.verification_gas_limit),
        "preVerificationGas": hex(op.pre_verification_gas),
        "maxFeePerGas": hex(op.max_fee_per_gas),
        "maxPriorityFeePerGas": hex(op.max_priority_fee_per_gas),
        "signature": "0x" + op.signature.hex(),
    }
    if op.factory is not None:
        out["factory"] = EIP7702_FACTORY if op.is_eip7702 else op.factory
        out["factoryData"] = "0x" + op.factory_data.hex()
    if op.paymaster is not None:
        out["paymaster"] = op.paymaster
        out["paymasterVerificationGasLimit"] = hex(op.paymaster_verification_gas_limit)
        out["paymasterPostOpGasLimit"] = hex(op.paymaster_post_op_gas_limit)
        out["paymasterData"] = "0x" + op.paymaster_data.hex()
    if op.eip7702_auth is not None:
        out["eip7702Auth"] = op.eip7702_auth.to_rpc()
    return out


def op_from_json(doc: dict[str, Any]) -> UserOperation:
    """`op_to_json`'s output back; KeyError or ValueError if it is not that."""
    factory = _entity(doc.get("factory"))
    if isinstance(factory, str) and factory.lower() == EIP7702_FACTORY:
        factory = MARKER
    paymaster = _entity(doc.get("paymaster"))
    auth = doc.get("eip7702Auth")
    return UserOperation(
        sender=checksum(doc["sender"]),
        nonce=_int(doc["nonce"]),
        call_data=_bytes(doc["callData"]),
        call_gas_limit=_int(doc["callGasLimit"]),
        verification_gas_limit=_int(doc["verificationGasLimit"]),
        pre_verification_gas=_int(doc["preVerificationGas"]),
        max_fee_per_gas=_int(doc["maxFeePerGas"]),
        max_priority_fee_per_gas=_int(doc["maxPriorityFeePerGas"]),
        signature=_bytes(doc["signature"]),
        factory=None if factory is None else checksum(factory),
        factory_data=_bytes(doc.get("factoryData", "0x")),
        paymaster=None if paymaster is None else checksum(paymaster),
        paymaster_verification_gas_limit=_int(doc.get("paymasterVerificationGasLimit", "0x0")),
        paymaster_post_op_gas_limit=_int(doc.get("paymasterPostOpGasLimit", "0x0")),
        paymaster_data=_bytes(doc.get("paymasterData", "0x")),
        eip7702_auth=None if auth is None else _authorization(auth),
    )


def _entity(value: str | None) -> str | None:
    """A factory or paymaster; "0x" and the zero address mean none, as on the wire."""
    return None if value in (None, "0x", ZERO_ADDRESS) else value


def _authorization(doc: dict[str, Any]) -> Authorization:
    return Authorization(
        chain_id=_int(doc["chainId"]),
        address=checksum(doc["address"]),
        nonce=_int(doc["nonce"]),
        y_parity=_int(doc["yParity"]),
        r=_int(doc["r"]),
        s=_int(doc["s"]),
    )


def _int(value: str) -> int:
    if not value.startswith("0x"):
        raise ValueError(f"expected a hex quantity, got {value!r}")
    return int(value, 16)


def _bytes(value: str) -> bytes:
    if not value.startswith("0x"):
        raise ValueError(f"expected hex data, got {value!r}")
    return bytes.fromhex(value[2:])
