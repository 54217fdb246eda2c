"""ERC-4337 UserOperations: the RPC (unpacked) form, the on-chain packed form, the hash
(EntryPoint v0.7, v0.8 and v0.9; a v0.6 op travels as one of these, `from_v06`/`as_v06`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from eth_abi.abi import encode

from entryway.domain.eip7702 import MARKER, Authorization
from entryway.domain.entry_points import EntryPointVersion, version_at
from entryway.domain.evm import address_bytes, checksum, keccak
from entryway.domain.paymaster_signature import signed_paymaster_and_data_hash
from entryway.domain.userop_v06 import UserOperationV06, user_op_hash_v06

PACKED_USEROP_TYPEHASH = keccak(
    b"PackedUserOperation(address sender,uint256 nonce,bytes initCode,bytes callData,"
    b"bytes32 accountGasLimits,uint256 preVerificationGas,bytes32 gasFees,bytes paymasterAndData)"
)
EIP712_DOMAIN_TYPEHASH = keccak(
    b"EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
)
ENTRY_POINT_DOMAIN_NAME = b"ERC4337"
ENTRY_POINT_DOMAIN_VERSION = b"1"
_UINT128_MAX = 2**128 - 1


_PACKED_OP_HEAD = 9 * 32


def _word(value: int) -> bytes:
    """A uint256 ABI word; negative or oversized values are refused like eth-abi does."""
    if not 0 <= value < 2**256:
        raise ValueError(f"{value} does not fit in uint256")
    return value.to_bytes(32, "big")


def pack_uint128_pair(high: int, low: int) -> bytes:
    """Two uint128 values in one bytes32, as the EntryPoint packs gas limits and fees."""
    if not (0 <= high <= _UINT128_MAX and 0 <= low <= _UINT128_MAX):
        raise ValueError("gas values must fit in uint128")
    return ((high << 128) | low).to_bytes(32, "big")


def unpack_uint128_pair(packed: bytes) -> tuple[int, int]:
    value = int.from_bytes(packed, "big")
    return value >> 128, value & _UINT128_MAX


@dataclass(frozen=True, slots=True)
class UserOperation:
    """A UserOperation in the unpacked form the v0.7/v0.8 bundler RPC speaks."""

    sender: str
    nonce: int
    call_data: bytes
    call_gas_limit: int
    verification_gas_limit: int
    pre_verification_gas: int
    max_fee_per_gas: int
    max_priority_fee_per_gas: int
    signature: bytes = b""
    factory: str | None = None
    factory_data: bytes = b""
    paymaster: str | None = None
    paymaster_verification_gas_limit: int = 0
    paymaster_post_op_gas_limit: int = 0
    paymaster_data: bytes = b""
    eip7702_auth: Authorization | None = None  # carried to the bundle, not part of the op

    @property
    def is_eip7702(self) -> bool:
        return self.factory == MARKER

    @property
    def init_code(self) -> bytes:
        if self.factory is None:
            return b""
        return address_bytes(self.factory) + self.factory_data

    @property
    def account_gas_limits(self) -> bytes:
        return pack_uint128_pair(self.verification_gas_limit, self.call_gas_limit)

    @property
    def gas_fees(self) -> bytes:
        return pack_uint128_pair(self.max_priority_fee_per_gas, self.max_fee_per_gas)

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
    def max_gas(self) -> int:
        """All the gas the op may be charged for (the EntryPoint's `requiredGas`)."""
        return (
            self.pre_verification_gas
            + self.verification_gas_limit
            + self.call_gas_limit
            + self.paymaster_verification_gas_limit
            + self.paymaster_post_op_gas_limit
        )

    @property
    def required_prefund(self) -> int:
        """What validation must leave deposited for the op: its max gas at its max fee."""
        return self.max_gas * self.max_fee_per_gas

    def packed(self) -> tuple[str, int, bytes, bytes, bytes, int, bytes, bytes, bytes]:
        """The PackedUserOperation tuple, in ABI order."""
        return (
            checksum(self.sender),
            self.nonce,
            self.init_code,
            self.call_data,
            self.account_gas_limits,
            self.pre_verification_gas,
            self.gas_fees,
            self.paymaster_and_data,
            self.signature,
        )

    def abi_encoded(self) -> bytes:
        """The PackedUserOperation tuple ABI-encoded in place (what follows the tuple's offset
        word in calldata): exactly eth-abi's encoding, written out because the bundler
        encodes every op several times (its hash, preVerificationGas, simulation calldata)."""
        tails = (self.init_code, self.call_data, self.paymaster_and_data, self.signature)
        offsets, at = [], _PACKED_OP_HEAD
        for tail in tails:
            offsets.append(at)
            at += 32 + len(tail) + (-len(tail) % 32)
        return b"".join(
            (
                bytes(12) + address_bytes(self.sender),
                _word(self.nonce),
                _word(offsets[0]),
                _word(offsets[1]),
                self.account_gas_limits,
                _word(self.pre_verification_gas),
                self.gas_fees,
                _word(offsets[2]),
                _word(offsets[3]),
                *(_word(len(t)) + t + bytes(-len(t) % 32) for t in tails),
            )
        )

    def with_signature(self, signature: bytes) -> UserOperation:
        return replace(self, signature=signature)

    def with_paymaster(
        self, paymaster: str, verification_gas_limit: int, post_op_gas_limit: int, data: bytes
    ) -> UserOperation:
        return replace(
            self,
            paymaster=paymaster,
            paymaster_verification_gas_limit=verification_gas_limit,
            paymaster_post_op_gas_limit=post_op_gas_limit,
            paymaster_data=data,
        )

    @classmethod
    def from_v06(cls, op: UserOperationV06) -> UserOperation:
        """A v0.6 op in this form: its factory and paymaster split from their byte fields, no
        paymaster gas limits (v0.6 has none). `as_v06` gives it back unchanged."""
        for name, field in (
            ("initCode", op.init_code),
            ("paymasterAndData", op.paymaster_and_data),
        ):
            if 0 < len(field) < 20:
                raise ValueError(f"{name} must be empty or start with a 20-byte address")
        return cls(
            sender=checksum(op.sender),
            nonce=op.nonce,
            call_data=op.call_data,
            call_gas_limit=op.call_gas_limit,
            verification_gas_limit=op.verification_gas_limit,
            pre_verification_gas=op.pre_verification_gas,
            max_fee_per_gas=op.max_fee_per_gas,
            max_priority_fee_per_gas=op.max_priority_fee_per_gas,
            signature=op.signature,
            factory=op.factory,
            factory_data=op.init_code[20:],
            paymaster=op.paymaster,
            paymaster_data=op.paymaster_and_data[20:],
        )

    def as_v06(self) -> UserOperationV06:
        """This op as EntryPoint v0.6 takes it; ValueError for what v0.6 cannot carry."""
        if self.paymaster_verification_gas_limit or self.paymaster_post_op_gas_limit:
            raise ValueError("EntryPoint v0.6 has no paymaster gas limits")
        if self.is_eip7702 or self.eip7702_auth is not None:
            raise ValueError("EntryPoint v0.6 does not support EIP-7702 senders")
        paymaster = b"" if self.paymaster is None else address_bytes(self.paymaster)
        return UserOperationV06(
            sender=self.sender,
            nonce=self.nonce,
            init_code=self.init_code,
            call_data=self.call_data,
            call_gas_limit=self.call_gas_limit,
            verification_gas_limit=self.verification_gas_limit,
            pre_verification_gas=self.pre_verification_gas,
            max_fee_per_gas=self.max_fee_per_gas,
            max_priority_fee_per_gas=self.max_priority_fee_per_gas,
            paymaster_and_data=paymaster + self.paymaster_data if paymaster else b"",
            signature=self.signature,
        )

    @classmethod
    def from_packed(
        cls, packed: tuple[str, int, bytes, bytes, bytes, int, bytes, bytes, bytes]
    ) -> UserOperation:
        sender, nonce, init_code, call_data, gas_limits, pvg, fees, pm_and_data, sig = packed
        verification_gas, call_gas = unpack_uint128_pair(gas_limits)
        priority_fee, max_fee = unpack_uint128_pair(fees)
        if init_code[:2] == b"\x77\x02" and len(init_code) < 20:
            init_code = address_bytes(MARKER)  # the marker may come unpadded
        factory = checksum(init_code[:20]) if len(init_code) >= 20 else None
        paymaster = checksum(pm_and_data[:20]) if len(pm_and_data) >= 20 else None
        return cls(
            sender=checksum(sender),
            nonce=nonce,
            call_data=call_data,
            call_gas_limit=call_gas,
            verification_gas_limit=verification_gas,
            pre_verification_gas=pvg,
            max_fee_per_gas=max_fee,
            max_priority_fee_per_gas=priority_fee,
            signature=sig,
            factory=factory,
            factory_data=init_code[20:],
            paymaster=paymaster,
            paymaster_verification_gas_limit=int.from_bytes(pm_and_data[20:36], "big"),
            paymaster_post_op_gas_limit=int.from_bytes(pm_and_data[36:52], "big"),
            paymaster_data=pm_and_data[52:],
        )


def eip712_domain_separator(name: bytes, version: bytes, chain_id: int, contract: str) -> bytes:
    """The EIP-712 domain separator (name, version, chainId, verifyingContract)."""
    return keccak(
        encode(
            ["bytes32", "bytes32", "bytes32", "uint256", "address"],
            [EIP712_DOMAIN_TYPEHASH, keccak(name), keccak(version), chain_id, checksum(contract)],
        )
    )


@lru_cache(maxsize=64)
def entry_point_domain_separator(entry_point: str, chain_id: int) -> bytes:
    return eip712_domain_separator(
        ENTRY_POINT_DOMAIN_NAME, ENTRY_POINT_DOMAIN_VERSION, chain_id, entry_point
    )


def user_op_struct_hash(
    op: UserOperation,
    init_code_hash: bytes | None = None,
    *,
    typehash: bytes = PACKED_USEROP_TYPEHASH,
    paymaster_and_data_hash: bytes | None = None,
) -> bytes:
    """hashStruct of the op under PACKED_USEROP_TYPEHASH: nine static words, concatenated.
    With an empty `typehash`, the keccak of the eight packed words v0.7 hashes;
    `paymaster_and_data_hash` stands for keccak(paymasterAndData) (v0.9's, without the
    paymaster signature)."""
    return keccak(
        b"".join(
            (
                typehash,
                bytes(12) + address_bytes(op.sender),
                _word(op.nonce),
                init_code_hash if init_code_hash is not None else keccak(op.init_code),
                keccak(op.call_data),
                op.account_gas_limits,
                _word(op.pre_verification_gas),
                op.gas_fees,
                paymaster_and_data_hash
                if paymaster_and_data_hash is not None
                else keccak(op.paymaster_and_data),
            )
        )
    )


def user_op_hash(
    op: UserOperation,
    entry_point: str,
    chain_id: int,
    *,
    delegate: str | None = None,
    version: EntryPointVersion | None = None,
) -> bytes:
    """The userOpHash the EntryPoint at `entry_point` computes (`version`, when not given,
    is the one its address says: entry_points.version_at).

    v0.7: keccak of the ABI encoding of (keccak of the op's eight packed fields, the
    EntryPoint, the chain id). v0.8: an EIP-712 digest under the EntryPoint's domain. v0.9:
    v0.8's digest, with a paymaster signature appended to paymasterAndData left out. v0.6:
    userop_v06.user_op_hash_v06 of the op's v0.6 form.

    For an EIP-7702 sender (initCode starting with the 0x7702 marker) the EntryPoint hashes
    the address the sender delegates to, followed by the rest of the initCode, in place of
    the initCode: `delegate` (from the op's authorization, or the sender's code) says which.
    """
    version = version or version_at(entry_point)
    if version is EntryPointVersion.V06:
        return user_op_hash_v06(op.as_v06(), entry_point, chain_id)
    if version is EntryPointVersion.V07:
        if op.is_eip7702:
            raise ValueError("EntryPoint v0.7 does not support EIP-7702 senders")
        inner = user_op_struct_hash(op, typehash=b"")
        return keccak(inner + bytes(12) + address_bytes(entry_point) + _word(chain_id))
    init_code_hash = None
    if op.is_eip7702:
        if delegate is None:
            raise ValueError("an EIP-7702 op's hash needs its delegate address")
        init_code_hash = keccak(address_bytes(delegate) + op.factory_data)
    pnd_hash = None
    if version is EntryPointVersion.V09:
        pnd_hash = signed_paymaster_and_data_hash(op.paymaster_and_data)
    domain = entry_point_domain_separator(entry_point, chain_id)
    struct_hash = user_op_struct_hash(op, init_code_hash, paymaster_and_data_hash=pnd_hash)
    return keccak(b"\x19\x01" + domain + struct_hash)
