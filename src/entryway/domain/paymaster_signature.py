"""EntryPoint v0.9's `paymasterSignature`: a paymaster's signature appended to paymasterAndData,
after the paymaster's own data, and left out of the userOpHash.

    paymasterAndData = paymaster (20) | verificationGasLimit (16) | postOpGasLimit (16)
                     | paymasterData | paymasterSignature | uint16(len(paymasterSignature))
                     | PAYMASTER_SIGNATURE_MAGIC (8)

The userOpHash covers paymasterAndData up to the signature, followed by the magic: the account
signs the op without the paymaster's signature, and the paymaster may sign in parallel.
"""

from __future__ import annotations

from entryway.domain.evm import keccak

PAYMASTER_DATA_OFFSET = 52
# keccak256("PaymasterSignature")[:8]
PAYMASTER_SIGNATURE_MAGIC = bytes.fromhex("22e325a297439656")
_SUFFIX_LEN = 2 + len(PAYMASTER_SIGNATURE_MAGIC)
_MAX_SIGNATURE_LEN = 2**16 - 1


def encode_paymaster_signature(signature: bytes) -> bytes:
    """The suffix that carries `signature` at the end of paymasterAndData (empty for none)."""
    if not signature:
        return b""
    if len(signature) > _MAX_SIGNATURE_LEN:
        raise ValueError("a paymaster signature is at most 65535 bytes")
    return signature + len(signature).to_bytes(2, "big") + PAYMASTER_SIGNATURE_MAGIC


def paymaster_signature_length(paymaster_and_data: bytes) -> int:
    """The length of the paymaster signature `paymaster_and_data` carries (0 for none); a
    ValueError when the suffix claims more bytes than the paymaster's data holds, as the
    EntryPoint rejects it (InvalidPaymasterSignatureLength)."""
    size = len(paymaster_and_data)
    if size < PAYMASTER_DATA_OFFSET + _SUFFIX_LEN:
        return 0
    if paymaster_and_data[-len(PAYMASTER_SIGNATURE_MAGIC) :] != PAYMASTER_SIGNATURE_MAGIC:
        return 0
    length = int.from_bytes(paymaster_and_data[-_SUFFIX_LEN : -len(PAYMASTER_SIGNATURE_MAGIC)])
    if length > size - PAYMASTER_DATA_OFFSET - _SUFFIX_LEN:
        raise ValueError(
            f"paymasterAndData's paymaster signature length {length} exceeds its {size} bytes"
        )
    return length


def split_paymaster_signature(paymaster_and_data: bytes) -> tuple[bytes, bytes]:
    """(paymasterAndData without the signature and its suffix, the signature)."""
    length = paymaster_signature_length(paymaster_and_data)
    if length == 0:
        return paymaster_and_data, b""
    end = len(paymaster_and_data) - _SUFFIX_LEN
    return paymaster_and_data[: end - length], paymaster_and_data[end - length : end]


def signed_paymaster_and_data_hash(paymaster_and_data: bytes) -> bytes:
    """What v0.9's userOpHash takes for paymasterAndData: its keccak with the paymaster
    signature and its length cut out (the magic kept)."""
    signed, signature = split_paymaster_signature(paymaster_and_data)
    if not signature:
        return keccak(paymaster_and_data)
    return keccak(signed + PAYMASTER_SIGNATURE_MAGIC)
