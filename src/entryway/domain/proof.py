"""Proof-of-inclusion documents (`entryway-proof/1`) and their offline verification. Pure.

A proof says: the document whose SHA-256 is `leaf` is in the Merkle tree (rules in
`domain/merkle.py`, named in `hashing`) whose `root` was anchored in NotaryAnchor
`contract` on chain `chainId` by `transactionHash`, in block `blockNumber` at `blockTime`
(Unix seconds). Example:

    {"version": "entryway-proof/1",
     "leaf": "0x…32 bytes: sha256(document)",
     "hashing": {"scheme": "entryway-merkle/1", "document": "sha256",
                 "leaf": "keccak256(0x00 || leaf)",
                 "node": "keccak256(0x01 || min(a, b) || max(a, b))",
                 "oddNode": "promoted"},
     "path": ["0x…", …],  (siblings from the leaf up to the root)
     "root": "0x…", "leafCount": 1000,
     "chainId": 80002, "contract": "0x…", "transactionHash": "0x…",
     "blockNumber": 123, "blockTime": 1767225600}

Parsing is strict: every field present, no others, hex of the right length. Offline
verification checks the document and the path; `entryway.notary.verify` checks the chain.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from entryway.domain.evm import checksum
from entryway.domain.hashing import sha256
from entryway.domain.merkle import SCHEME, MerkleTree, max_path_length, root_from_path
from entryway.errors import EntrywayError

PROOF_VERSION = "entryway-proof/1"
HASHING_RULES: Mapping[str, str] = {
    "scheme": SCHEME,
    "document": "sha256",
    "leaf": "keccak256(0x00 || leaf)",
    "node": "keccak256(0x01 || min(a, b) || max(a, b))",
    "oddNode": "promoted",
}
_FIELDS = frozenset(
    {
        "version",
        "leaf",
        "hashing",
        "path",
        "root",
        "leafCount",
        "chainId",
        "contract",
        "transactionHash",
        "blockNumber",
        "blockTime",
    }
)
_HASH_HEX = re.compile(r"0x[0-9a-fA-F]{64}")
_ADDRESS_HEX = re.compile(r"0x[0-9a-fA-F]{40}")
MAX_LEAF_COUNT = 2**32 - 1  # NotaryAnchor stores leafCount as uint32


def document_hash(data: bytes) -> bytes:
    """What a document is notarized as: SHA-256 of its bytes (what `sha256sum` prints)."""
    return sha256(data)


class ProofFormatError(EntrywayError, ValueError):
    """The proof document is not a well-formed `entryway-proof/1` document."""


class UnsupportedProofError(ProofFormatError):
    """The proof is of a version, or uses hashing rules, this verifier does not know."""


@dataclass(frozen=True, slots=True)
class AnchorRecord:
    """Where and when a root was anchored: one NotaryAnchor.anchor transaction."""

    chain_id: int
    contract: str
    transaction_hash: bytes
    block_number: int
    block_time: int


@dataclass(frozen=True, slots=True)
class InclusionProof:
    leaf: bytes  # the document hash
    path: tuple[bytes, ...]
    root: bytes
    leaf_count: int
    anchor: AnchorRecord

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": PROOF_VERSION,
            "leaf": _hex(self.leaf),
            "hashing": dict(HASHING_RULES),
            "path": [_hex(s) for s in self.path],
            "root": _hex(self.root),
            "leafCount": self.leaf_count,
            "chainId": self.anchor.chain_id,
            "contract": checksum(self.anchor.contract),
            "transactionHash": _hex(self.anchor.transaction_hash),
            "blockNumber": self.anchor.block_number,
            "blockTime": self.anchor.block_time,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: Any) -> InclusionProof:
        """Parse a proof document; raises ProofFormatError saying what is wrong."""
        if not isinstance(data, Mapping):
            raise ProofFormatError("a proof is a JSON object")
        version = data.get("version")
        if version != PROOF_VERSION:
            if version is None:
                raise ProofFormatError("missing field 'version'")
            raise UnsupportedProofError(
                f"unsupported proof version {version!r} (this verifier reads {PROOF_VERSION!r})"
            )
        missing = sorted(_FIELDS - set(data))
        if missing:
            raise ProofFormatError(f"missing field(s) {', '.join(map(repr, missing))}")
        unknown = sorted(str(k) for k in set(data) - _FIELDS)
        if unknown:
            raise ProofFormatError(f"unexpected field(s) {', '.join(map(repr, unknown))}")
        if data["hashing"] != HASHING_RULES:
            raise UnsupportedProofError(
                f"unsupported hashing rules {data['hashing']!r} (this verifier knows {SCHEME})"
            )
        path = data["path"]
        if not isinstance(path, list):
            raise ProofFormatError("'path' must be a list of 32-byte hex hashes")
        leaf_count = _integer(data, "leafCount", minimum=1, maximum=MAX_LEAF_COUNT)
        if len(path) > max_path_length(leaf_count):
            raise ProofFormatError(
                f"'path' has {len(path)} entries; a tree of {leaf_count} leaves has paths "
                f"of at most {max_path_length(leaf_count)}"
            )
        return cls(
            leaf=_hash(data, "leaf"),
            path=tuple(_hash_value(s, f"path[{i}]") for i, s in enumerate(path)),
            root=_hash(data, "root"),
            leaf_count=leaf_count,
            anchor=AnchorRecord(
                chain_id=_integer(data, "chainId", minimum=1),
                contract=_address(data, "contract"),
                transaction_hash=_hash(data, "transactionHash"),
                block_number=_integer(data, "blockNumber", minimum=0),
                block_time=_integer(data, "blockTime", minimum=1),
            ),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> InclusionProof:
        try:
            data = json.loads(text, object_pairs_hook=_unique_keys)
        except ProofFormatError:
            raise
        except (ValueError, UnicodeDecodeError) as exc:
            raise ProofFormatError(f"not JSON: {exc}") from None
        return cls.from_dict(data)


def proof_for_leaf(tree: MerkleTree, index: int, anchor: AnchorRecord) -> InclusionProof:
    """The proof of leaf `index` of `tree`, whose root `anchor` records."""
    return InclusionProof(
        leaf=tree.document_hashes[index],
        path=tree.path(index),
        root=tree.root,
        leaf_count=tree.leaf_count,
        anchor=anchor,
    )


@dataclass(frozen=True, slots=True)
class VerificationResult:
    """The outcome of a verification: `reason` says why it failed, or what was proven."""

    valid: bool
    reason: str
    checks: tuple[str, ...] = ()  # what passed, in order, for reports


def verify_offline(
    proof: InclusionProof | Mapping[str, Any], document_bytes: bytes | None = None
) -> VerificationResult:
    """Check what needs no chain: the proof's form, the document (if given) and the path.

    A valid result proves the document hash is in a tree with the proof's root; that the
    root was anchored is for `entryway.notary.verify.verify_on_chain` to check.
    """
    checks: list[str] = []
    if not isinstance(proof, InclusionProof):
        try:
            proof = InclusionProof.from_dict(proof)
        except ProofFormatError as exc:
            return VerificationResult(False, str(exc))
    checks.append(f"proof is a well-formed {PROOF_VERSION} document")
    if document_bytes is not None:
        actual = document_hash(document_bytes)
        if actual != proof.leaf:
            reason = (
                f"document does not match the leaf: its sha256 is {_hex(actual)}, "
                f"the proof's leaf is {_hex(proof.leaf)}"
            )
            return VerificationResult(False, reason, tuple(checks))
        checks.append(f"document's sha256 is the leaf {_hex(proof.leaf)}")
    if root_from_path(proof.leaf, proof.path) != proof.root:
        return VerificationResult(False, "path does not lead to the root", tuple(checks))
    checks.append(f"path of {len(proof.path)} hash(es) leads to the root {_hex(proof.root)}")
    return VerificationResult(True, "the leaf is in the tree of the root", tuple(checks))


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    counts = Counter(k for k, _ in pairs)
    duplicates = sorted(k for k, n in counts.items() if n > 1)
    if duplicates:
        raise ProofFormatError(f"duplicate field(s) {', '.join(map(repr, duplicates))}")
    return dict(pairs)


def _hex(value: bytes) -> str:
    return "0x" + value.hex()


def _hash_value(value: Any, name: str) -> bytes:
    if not isinstance(value, str) or not _HASH_HEX.fullmatch(value):
        raise ProofFormatError(f"{name!r} must be a 32-byte hash as 0x-prefixed hex")
    return bytes.fromhex(value[2:])


def _hash(data: Mapping[str, Any], name: str) -> bytes:
    return _hash_value(data[name], name)


def _integer(
    data: Mapping[str, Any], name: str, *, minimum: int, maximum: int | None = None
) -> int:
    value = data[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProofFormatError(f"{name!r} must be an integer")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise ProofFormatError(f"{name!r} must be {bound}, got {value}")
    return value


def _address(data: Mapping[str, Any], name: str) -> str:
    value = data[name]
    if not isinstance(value, str) or not _ADDRESS_HEX.fullmatch(value):
        raise ProofFormatError(f"{name!r} must be a 20-byte address as 0x-prefixed hex")
    mixed_case = value[2:] != value[2:].lower() and value[2:] != value[2:].upper()
    if mixed_case and checksum(value) != value:
        raise ProofFormatError(f"{name!r} has a wrong EIP-55 checksum: {value}")
    return checksum(value)
