"""ERC-4337 UserOperations for EntryPoint v0.7, v0.8 and v0.9: the RPC form, the packed fields,
the userOpHash of each release, and the EIP-712 digests Entryway's SmartAccount verifies."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from eth_abi.abi import encode

from entryway_sdk._hex import ZERO_ADDRESS, address_bytes, checksum, hex_bytes, keccak, quantity
from entryway_sdk.eip7702 import Authorization

ENTRY_POINT_V06 = "0x5FF137D4b0FDCD49DcA30c7CF57E578a026d2789"
ENTRY_POINT_V07 = "0x0000000071727De22E5E9d8BAf0edAc6f37da032"
ENTRY_POINT_V08 = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
# v0.9: the release's address on public chains, and where its npm release candidate (which
# Entryway's devnets carry) lands with the release's salt.
ENTRY_POINT_V09 = "0x433709009B8330FDa32311DF1C2AFA402eD8D009"
ENTRY_POINT_V09_DEVNET = "0x63e9dfF4784c514b314670f239a52690F5709433"
EntryPointVersion = Literal["0.6", "0.7", "0.8", "0.9"]
CANONICAL_ENTRY_POINTS: dict[EntryPointVersion, str] = {
    "0.6": ENTRY_POINT_V06,
    "0.7": ENTRY_POINT_V07,
    "0.8": ENTRY_POINT_V08,
    "0.9": ENTRY_POINT_V09,
}
_VERSIONS = ("0.6", "0.7", "0.8", "0.9")
# v0.9: paymasterAndData may end in a paymaster signature, its uint16 length and this magic;
# the userOpHash leaves the signature and length out (the paymaster signs after the account).
PAYMASTER_SIG_MAGIC = bytes.fromhex("22e325a297439656")
PAYMASTER_SIGNATURE_MAGIC = PAYMASTER_SIG_MAGIC
_PAYMASTER_DATA_OFFSET = 52
_UINT128_MAX = 2**128 - 1

PACKED_USEROP_TYPEHASH = keccak(
    b"PackedUserOperation(address sender,uint256 nonce,bytes initCode,bytes callData,"
    b"bytes32 accountGasLimits,uint256 preVerificationGas,bytes32 gasFees,bytes paymasterAndData)"
)
EIP712_DOMAIN_TYPEHASH = keccak(
    b"EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
)
RECOVERY_APPROVAL_TYPEHASH = keccak(
    b"RecoveryApproval(address account,address newOwner,uint256 recoveryNonce,uint256 chainId)"
)
MESSAGE_TYPEHASH = keccak(b"SmartAccountMessage(bytes32 hash)")


def _uint128_pair(high: int, low: int) -> bytes:
    if not (0 <= high <= _UINT128_MAX and 0 <= low <= _UINT128_MAX):
        raise ValueError("gas values must fit in uint128")
    return ((high << 128) | low).to_bytes(32, "big")


@dataclass(frozen=True, slots=True)
class UserOperation:
    """A UserOperation as the v0.7/v0.8 bundler RPC speaks it (unpacked); integers for gas
    and wei, bytes for data. Immutable: `with_(...)` makes a changed copy."""

    sender: str
    nonce: int
    call_data: bytes
    call_gas_limit: int = 0
    verification_gas_limit: int = 0
    pre_verification_gas: int = 0
    max_fee_per_gas: int = 0
    max_priority_fee_per_gas: int = 0
    signature: bytes = b""
    factory: str | None = None
    factory_data: bytes = b""
    paymaster: str | None = None
    paymaster_verification_gas_limit: int = 0
    paymaster_post_op_gas_limit: int = 0
    paymaster_data: bytes = b""
    # An EIP-7702 EOA's authorization, carried into the bundle (not part of the hash).
    eip7702_auth: Authorization | None = None

    def with_(self, **changes: Any) -> UserOperation:
        return replace(self, **changes)

    @property
    def init_code(self) -> bytes:
        return b"" if self.factory is None else address_bytes(self.factory) + self.factory_data

    @property
    def account_gas_limits(self) -> bytes:
        return _uint128_pair(self.verification_gas_limit, self.call_gas_limit)

    @property
    def gas_fees(self) -> bytes:
        return _uint128_pair(self.max_priority_fee_per_gas, self.max_fee_per_gas)

    @property
    def paymaster_and_data(self) -> bytes:
        if self.paymaster is None:
            return b""
        return (
            address_bytes(self.paymaster)
            + self.paymaster_verification_gas_limit.to_bytes(16, "big")
            + self.paymaster_post_op_gas_limit.to_bytes(16, "big")
            + self.paymaster_data
        )

    @property
    def paymaster_and_data_v06(self) -> bytes:
        """v0.6's paymasterAndData: the paymaster and its data, no gas limits."""
        return (
            b"" if self.paymaster is None else address_bytes(self.paymaster) + self.paymaster_data
        )

    def to_rpc_v06(self) -> dict[str, Any]:
        """The op as EntryPoint v0.6's bundler RPC speaks it (initCode, paymasterAndData)."""
        return {
            **self._common_rpc(),
            "initCode": "0x" + self.init_code.hex(),
            "paymasterAndData": "0x" + self.paymaster_and_data_v06.hex(),
        }

    def _common_rpc(self) -> dict[str, Any]:
        """The fields every release's RPC form has, alike."""
        return {
            "sender": checksum(self.sender),
            "nonce": hex(self.nonce),
            "callData": "0x" + self.call_data.hex(),
            "callGasLimit": hex(self.call_gas_limit),
            "verificationGasLimit": hex(self.verification_gas_limit),
            "preVerificationGas": hex(self.pre_verification_gas),
            "maxFeePerGas": hex(self.max_fee_per_gas),
            "maxPriorityFeePerGas": hex(self.max_priority_fee_per_gas),
            "signature": "0x" + self.signature.hex(),
        }

    def to_rpc(self) -> dict[str, Any]:
        """The JSON object `eth_sendUserOperation` and ERC-7677 methods take (v0.7 on)."""
        out = self._common_rpc()
        if self.factory is not None:
            out["factory"] = checksum(self.factory)
            out["factoryData"] = "0x" + self.factory_data.hex()
        if self.paymaster is not None:
            out["paymaster"] = checksum(self.paymaster)
            out["paymasterVerificationGasLimit"] = hex(self.paymaster_verification_gas_limit)
            out["paymasterPostOpGasLimit"] = hex(self.paymaster_post_op_gas_limit)
            out["paymasterData"] = "0x" + self.paymaster_data.hex()
        if self.eip7702_auth is not None:
            out["eip7702Auth"] = self.eip7702_auth.to_rpc()
        return out

    @classmethod
    def from_rpc(cls, raw: Mapping[str, Any]) -> UserOperation:
        """The inverse of `to_rpc`; missing gas and fee fields read as 0."""

        def number(name: str) -> int:
            return quantity(raw.get(name) or 0, name)

        def data(name: str) -> bytes:
            return hex_bytes(raw.get(name) or "0x", name)

        factory = raw.get("factory")
        paymaster = raw.get("paymaster")
        auth = raw.get("eip7702Auth")
        return cls(
            sender=checksum(str(raw["sender"])),
            nonce=number("nonce"),
            call_data=data("callData"),
            call_gas_limit=number("callGasLimit"),
            verification_gas_limit=number("verificationGasLimit"),
            pre_verification_gas=number("preVerificationGas"),
            max_fee_per_gas=number("maxFeePerGas"),
            max_priority_fee_per_gas=number("maxPriorityFeePerGas"),
            signature=data("signature"),
            factory=checksum(factory) if factory and factory not in ("0x", ZERO_ADDRESS) else None,
            factory_data=data("factoryData"),
            paymaster=(
                checksum(paymaster) if paymaster and paymaster not in ("0x", ZERO_ADDRESS) else None
            ),
            paymaster_verification_gas_limit=number("paymasterVerificationGasLimit"),
            paymaster_post_op_gas_limit=number("paymasterPostOpGasLimit"),
            paymaster_data=data("paymasterData"),
            eip7702_auth=None if auth is None else Authorization.from_rpc(auth),
        )


def domain_separator(name: bytes, version: bytes, chain_id: int, contract: str) -> bytes:
    """EIP-712 domain separator over (name, version, chainId, verifyingContract)."""
    return keccak(
        encode(
            ["bytes32", "bytes32", "bytes32", "uint256", "address"],
            [EIP712_DOMAIN_TYPEHASH, keccak(name), keccak(version), chain_id, checksum(contract)],
        )
    )


def _typed_digest(domain: bytes, struct_hash: bytes) -> bytes:
    return keccak(b"\x19\x01" + domain + struct_hash)


_PACKED_TYPES = [
    *("address", "uint256", "bytes32", "bytes32"),
    *("bytes32", "uint256", "bytes32", "bytes32"),
]


def paymaster_and_data_hash(data: bytes, version: EntryPointVersion = "0.8") -> bytes:
    """keccak of paymasterAndData as the release hashes it: v0.9 leaves out a paymaster
    signature appended with its length and magic (keeping the magic), others hash it all."""
    if version != "0.9" or len(data) < _PAYMASTER_DATA_OFFSET + 10:
        return keccak(data)
    if data[-8:] != PAYMASTER_SIG_MAGIC:
        return keccak(data)
    length = int.from_bytes(data[-10:-8], "big")
    if length == 0:
        return keccak(data)
    if length > len(data) - _PAYMASTER_DATA_OFFSET - 10:
        raise ValueError("the paymaster signature's length reaches before paymasterData")
    return keccak(data[: len(data) - length - 10] + PAYMASTER_SIG_MAGIC)


def _packed_fields(op: UserOperation, version: EntryPointVersion = "0.8") -> list[object]:
    """The op's eight fields as v0.7 to v0.9 hash them (byte strings by their keccak)."""
    return [
        checksum(op.sender),
        op.nonce,
        keccak(op.init_code),
        keccak(op.call_data),
        op.account_gas_limits,
        op.pre_verification_gas,
        op.gas_fees,
        paymaster_and_data_hash(op.paymaster_and_data, version),
    ]


def user_op_struct_hash(op: UserOperation, version: EntryPointVersion = "0.8") -> bytes:
    """v0.8's (and v0.9's) EIP-712 struct hash: the typehash, then the eight packed fields."""
    fields = _packed_fields(op, version)
    return keccak(encode(["bytes32", *_PACKED_TYPES], [PACKED_USEROP_TYPEHASH, *fields]))


def _v06_fields_hash(op: UserOperation) -> bytes:
    """keccak of v0.6's ten unpacked fields (byte strings by their keccak)."""
    types = ["address", "uint256", "bytes32", "bytes32", *(["uint256"] * 5), "bytes32"]
    values: list[object] = [
        checksum(op.sender),
        op.nonce,
        keccak(op.init_code),
        keccak(op.call_data),
        op.call_gas_limit,
        op.verification_gas_limit,
        op.pre_verification_gas,
        op.max_fee_per_gas,
        op.max_priority_fee_per_gas,
        keccak(op.paymaster_and_data_v06),
    ]
    return keccak(encode(types, values))


def entry_point_version(entry_point: str) -> EntryPointVersion:
    """The release of the EntryPoint at `entry_point`: v0.6, v0.7 and v0.9 at their addresses
    (v0.9's devnet one included), v0.8 anywhere else (as the service takes an EntryPoint
    deployed elsewhere, a devnet's, to be)."""
    known: dict[str, EntryPointVersion] = {
        ENTRY_POINT_V06: "0.6",
        ENTRY_POINT_V07: "0.7",
        ENTRY_POINT_V09: "0.9",
        ENTRY_POINT_V09_DEVNET: "0.9",
    }
    return known.get(checksum(entry_point), "0.8")


def _packed_fields_hash(op: UserOperation) -> bytes:
    """keccak of the eight packed fields v0.7 hashes (v0.8's struct hash without its typehash)."""
    return keccak(encode(_PACKED_TYPES, _packed_fields(op)))


def user_op_hash(
    op: UserOperation,
    entry_point: str,
    chain_id: int,
    *,
    version: EntryPointVersion | None = None,
) -> bytes:
    """The userOpHash the EntryPoint at `entry_point` computes; `version`, when not given, is
    the one the address says (`entry_point_version`).

    v0.6: keccak of abi.encode(keccak of the op's ten unpacked fields, entryPoint, chainId).
    v0.7: keccak of abi.encode(keccak of the op's eight packed fields, entryPoint, chainId).
    v0.8: the EIP-712 digest of the packed op under ("ERC4337", "1", chainId, entryPoint).
    v0.9: v0.8's, with a paymaster signature appended to paymasterAndData left out.
    What an account signs over it is the account's choice: Entryway's SmartAccount signs the
    digest as it is, v0.7's SimpleAccount an EIP-191 message of it."""
    version = version or entry_point_version(entry_point)
    if version not in _VERSIONS:
        raise ValueError(
            f"unsupported EntryPoint version {version!r} (supported: {', '.join(_VERSIONS)})"
        )
    if version in ("0.6", "0.7"):
        inner = _v06_fields_hash(op) if version == "0.6" else _packed_fields_hash(op)
        return keccak(
            encode(["bytes32", "address", "uint256"], [inner, checksum(entry_point), chain_id])
        )
    domain = domain_separator(b"ERC4337", b"1", chain_id, entry_point)
    return _typed_digest(domain, user_op_struct_hash(op, version))


def _smart_account_domain(account: str, chain_id: int) -> bytes:
    return domain_separator(b"EntrywaySmartAccount", b"1", chain_id, account)


def recovery_digest(account: str, new_owner: str, recovery_nonce: int, chain_id: int) -> bytes:
    """What a guardian signs to approve `new_owner` for `account` under its current recovery
    nonce (EIP-712 `RecoveryApproval`, the same as `SmartAccount.recoveryDigest`)."""
    struct = keccak(
        encode(
            ["bytes32", "address", "address", "uint256", "uint256"],
            [
                RECOVERY_APPROVAL_TYPEHASH,
                checksum(account),
                checksum(new_owner),
                recovery_nonce,
                chain_id,
            ],
        )
    )
    return _typed_digest(_smart_account_domain(account, chain_id), struct)


def message_digest(account: str, chain_id: int, message_hash: bytes) -> bytes:
    """What the owner signs so that the account's ERC-1271 `isValidSignature(message_hash,
    signature)` holds (`SmartAccount.messageDigest`)."""
    struct = keccak(encode(["bytes32", "bytes32"], [MESSAGE_TYPEHASH, message_hash]))
    return _typed_digest(_smart_account_domain(account, chain_id), struct)
