"""The wire format of UserOperations (ERC-4337 v0.7/v0.8 RPC), parsed strictly."""

from __future__ import annotations

import re
from typing import Any

from entryway.bundler.errors import invalid_params
from entryway.domain.eip7702 import MARKER, Authorization
from entryway.domain.evm import checksum
from entryway.domain.paymaster_signature import encode_paymaster_signature
from entryway.domain.userop import UserOperation
from entryway.domain.userop_json import op_to_json

# A quantity is a hex string. The spec writes it without leading zeros; several clients pad
# ("0x01", a 32-byte word), so zeros are tolerated, up to 64 digits in all.
_HEX_QUANTITY = re.compile(r"0x[0-9a-fA-F]{1,64}")
_HEX_DATA = re.compile(r"0x(?:[0-9a-fA-F]{2})*")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
_UINT256_MAX = 2**256 - 1
_UINT128_MAX = 2**128 - 1

_REQUIRED = (
    "sender",
    "nonce",
    "callData",
    "callGasLimit",
    "verificationGasLimit",
    "preVerificationGas",
    "maxFeePerGas",
    "maxPriorityFeePerGas",
    "signature",
)


def parse_quantity(value: Any, field: str, *, limit: int = _UINT256_MAX) -> int:
    """A hex string only: a JSON number, a bool or a decimal string is refused, as the
    spec's quantity type is (`12` and `"12"` would otherwise be read two ways)."""
    if not isinstance(value, str):
        raise invalid_params(f"{field}: expected a hex quantity string, got {_shown(value)}")
    if not _HEX_QUANTITY.fullmatch(value):
        raise invalid_params(f"{field}: expected a hex quantity (0x…), got {_shown(value)}")
    number = int(value, 16)
    if number > limit:
        raise invalid_params(f"{field}: {number} is out of range")
    return number


def parse_data(value: Any, field: str) -> bytes:
    if not isinstance(value, str) or not _HEX_DATA.fullmatch(value):
        raise invalid_params(f"{field}: expected hex bytes, got {_shown(value)}")
    return bytes.fromhex(value[2:])


def parse_address(value: Any, field: str) -> str:
    if not isinstance(value, str) or not _ADDRESS.fullmatch(value):
        raise invalid_params(f"{field}: expected a 20-byte address, got {_shown(value)}")
    return checksum(value)


def _shown(value: Any) -> str:
    """What the client sent, for an error message: a JSON type, or a string cut short."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if not isinstance(value, str):
        return "null"
    return repr(value if len(value) <= 80 else value[:80] + "…")


def _optional(raw: dict[str, Any], name: str, absent: str) -> Any:
    """An optional field's value; only a missing field or null takes the default."""
    value = raw.get(name)
    return absent if value is None else value


def parse_user_operation(raw: Any) -> UserOperation:
    if not isinstance(raw, dict):
        raise invalid_params("userOp: expected an object")
    missing = [f for f in _REQUIRED if raw.get(f) is None]
    if missing:
        raise invalid_params(f"userOp: missing {', '.join(missing)}")
    factory = raw.get("factory")
    paymaster = raw.get("paymaster")
    if factory in ("0x", "0x" + "00" * 20):
        factory = None
    if paymaster in ("0x", "0x" + "00" * 20):
        paymaster = None
    if isinstance(factory, str) and factory.lower() == "0x7702":
        factory = MARKER
    auth = raw.get("eip7702Auth")
    return UserOperation(
        sender=parse_address(raw["sender"], "sender"),
        nonce=parse_quantity(raw["nonce"], "nonce"),
        call_data=parse_data(raw["callData"], "callData"),
        call_gas_limit=parse_quantity(raw["callGasLimit"], "callGasLimit", limit=_UINT128_MAX),
        verification_gas_limit=parse_quantity(
            raw["verificationGasLimit"], "verificationGasLimit", limit=_UINT128_MAX
        ),
        pre_verification_gas=parse_quantity(raw["preVerificationGas"], "preVerificationGas"),
        max_fee_per_gas=parse_quantity(raw["maxFeePerGas"], "maxFeePerGas", limit=_UINT128_MAX),
        max_priority_fee_per_gas=parse_quantity(
            raw["maxPriorityFeePerGas"], "maxPriorityFeePerGas", limit=_UINT128_MAX
        ),
        signature=parse_data(raw["signature"], "signature"),
        factory=None if factory is None else parse_address(factory, "factory"),
        factory_data=parse_data(_optional(raw, "factoryData", "0x"), "factoryData"),
        paymaster=None if paymaster is None else parse_address(paymaster, "paymaster"),
        paymaster_verification_gas_limit=parse_quantity(
            _optional(raw, "paymasterVerificationGasLimit", "0x0"),
            "paymasterVerificationGasLimit",
            limit=_UINT128_MAX,
        ),
        paymaster_post_op_gas_limit=parse_quantity(
            _optional(raw, "paymasterPostOpGasLimit", "0x0"),
            "paymasterPostOpGasLimit",
            limit=_UINT128_MAX,
        ),
        paymaster_data=_paymaster_data(raw),
        eip7702_auth=None if auth is None else parse_authorization(auth),
    )


def _paymaster_data(raw: dict[str, Any]) -> bytes:
    """paymasterData, with a separately given `paymasterSignature` (EntryPoint v0.9, as viem
    sends it) appended in the release's suffix form."""
    data = parse_data(_optional(raw, "paymasterData", "0x"), "paymasterData")
    signature = parse_data(_optional(raw, "paymasterSignature", "0x"), "paymasterSignature")
    try:
        return data + encode_paymaster_signature(signature)
    except ValueError as exc:
        raise invalid_params(f"paymasterSignature: {exc}") from None


def parse_authorization(raw: Any) -> Authorization:
    if not isinstance(raw, dict):
        raise invalid_params("eip7702Auth: expected an object")
    return Authorization(
        chain_id=parse_quantity(raw.get("chainId"), "eip7702Auth.chainId"),
        address=parse_address(raw.get("address"), "eip7702Auth.address"),
        nonce=parse_quantity(raw.get("nonce"), "eip7702Auth.nonce", limit=2**64 - 1),
        y_parity=parse_quantity(raw.get("yParity"), "eip7702Auth.yParity", limit=1),
        r=parse_quantity(raw.get("r"), "eip7702Auth.r"),
        s=parse_quantity(raw.get("s"), "eip7702Auth.s"),
    )


def user_operation_json(op: UserOperation) -> dict[str, Any]:
    """The op in its JSON-RPC form (ERC-4337 v0.8 field names, hex quantities)."""
    return op_to_json(op)
