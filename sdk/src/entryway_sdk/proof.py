"""Proofs of inclusion (`entryway-proof/1`) and their offline verification, written from the
published rules (docs/notary.md) so a proof is checked without trusting the service's code.

Hashing rules, scheme `entryway-merkle/1`:

    document hash  sha256(document bytes)
    leaf node      keccak256(0x00 || documentHash)
    inner node     keccak256(0x01 || min(a, b) || max(a, b))   (32-byte strings compared)
    odd node       promoted to the next level unchanged: it adds nothing to a path

so a path is a plain list of siblings from the leaf up, and verification folds it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from eth_utils.address import to_checksum_address

from entryway_sdk._hex import keccak
from entryway_sdk.errors import ProofFormatError, UnsupportedProofError

PROOF_VERSION = "entryway-proof/1"
MERKLE_SCHEME = "entryway-merkle/1"
HASHING_RULES: Mapping[str, str] = {
    "scheme": MERKLE_SCHEME,
    "document": "sha256",
    "leaf": "keccak256(0x00 || leaf)",
    "node": "keccak256(0x01 || min(a, b) || max(a, b))",
    "oddNode": "promoted",
}
MAX_LEAF_COUNT = 2**32 - 1  # NotaryAnchor keeps a root's leaf count as a uint32
_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"
_FIELDS = (
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
)
_HASH = re.compile(r"0x[0-9a-fA-F]{64}")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")


def document_hash(data: bytes) -> str:
    """What a document is notarized as: the SHA-256 of its bytes, as 0x-hex (what
    `sha256sum` prints, with the prefix)."""
    return "0x" + hashlib.sha256(data).hexdigest()


def leaf_node(doc_hash: bytes) -> bytes:
    """A document hash's node in the tree: keccak256(0x00 || documentHash)."""
    return keccak(_LEAF_PREFIX + _bytes32(doc_hash, "a document hash"))


def inner_node(a: bytes, b: bytes) -> bytes:
    """The parent of two nodes: keccak256(0x01 || min(a, b) || max(a, b))."""
    a, b = _bytes32(a, "a node"), _bytes32(b, "a node")
    return keccak(_NODE_PREFIX + min(a, b) + max(a, b))


def root_from_path(doc_hash: bytes, path: Sequence[bytes]) -> bytes:
    """The root that `path` leads to from the leaf of `doc_hash`."""
    node = leaf_node(doc_hash)
    for sibling in path:
        node = inner_node(node, sibling)
    return node


def max_path_length(leaf_count: int) -> int:
    """The most siblings a path has in a tree of `leaf_count` leaves: ceil(log2 n)."""
    return (leaf_count - 1).bit_length()


@dataclass(frozen=True, slots=True)
class Proof:
    """An `entryway-proof/1` document: the document hash (`leaf`), its Merkle `path` to the
    `root`, and where the root was anchored (chain, NotaryAnchor contract, transaction,
    block and block time in Unix seconds). Hashes are lower-case 0x-hex."""

    leaf: str
    path: tuple[str, ...]
    root: str
    leaf_count: int
    chain_id: int
    contract: str  # EIP-55
    transaction_hash: str
    block_number: int
    block_time: int

    @property
    def document_hash(self) -> str:
        return self.leaf

    @classmethod
    def from_dict(cls, data: Any) -> Proof:
        """Parse the document strictly: every field, no others, exact hashing rules, 32-byte
        hashes, JSON integers. Raises ProofFormatError (UnsupportedProofError for another
        version or other rules) saying what is wrong."""
        if not isinstance(data, Mapping):
            raise ProofFormatError("a proof is a JSON object")
        version = data.get("version")
        if version != PROOF_VERSION:
            if version is None:
                raise ProofFormatError("missing field 'version'")
            raise UnsupportedProofError(
                f"unsupported proof version {version!r} (this SDK reads {PROOF_VERSION!r})"
            )
        missing = [name for name in _FIELDS if name not in data]
        if missing:
            raise ProofFormatError(f"missing field(s) {', '.join(map(repr, missing))}")
        unknown = sorted(str(k) for k in data if k not in _FIELDS)
        if unknown:
            raise ProofFormatError(f"unexpected field(s) {', '.join(map(repr, unknown))}")
        hashing = data["hashing"]
        if not isinstance(hashing, Mapping) or dict(hashing) != dict(HASHING_RULES):
            raise UnsupportedProofError(
                f"unsupported hashing rules {hashing!r} (this SDK knows {MERKLE_SCHEME})"
            )
        path = data["path"]
        if not isinstance(path, list):
            raise ProofFormatError("'path' must be a list of 32-byte hex hashes")
        leaf_count = _integer(data, "leafCount", 1, MAX_LEAF_COUNT)
        if len(path) > max_path_length(leaf_count):
            raise ProofFormatError(
                f"'path' has {len(path)} entries; a tree of {leaf_count} leaves has paths of "
                f"at most {max_path_length(leaf_count)}"
            )
        return cls(
            leaf=_hash(data["leaf"], "leaf"),
            path=tuple(_hash(s, f"path[{i}]") for i, s in enumerate(path)),
            root=_hash(data["root"], "root"),
            leaf_count=leaf_count,
            chain_id=_integer(data, "chainId", 1),
            contract=_address(data["contract"], "contract"),
            transaction_hash=_hash(data["transactionHash"], "transactionHash"),
            block_number=_integer(data, "blockNumber", 0),
            block_time=_integer(data, "blockTime", 1),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Proof:
        """Parse a proof file's text (duplicate keys refused)."""
        try:
            data = json.loads(text, object_pairs_hook=_unique_keys)
        except ProofFormatError:
            raise
        except (ValueError, UnicodeDecodeError) as exc:
            raise ProofFormatError(f"not JSON: {exc}") from None
        return cls.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        """The `entryway-proof/1` document, as the service hands it out."""
        return {
            "version": PROOF_VERSION,
            "leaf": self.leaf,
            "hashing": dict(HASHING_RULES),
            "path": list(self.path),
            "root": self.root,
            "leafCount": self.leaf_count,
            "chainId": self.chain_id,
            "contract": self.contract,
            "transactionHash": self.transaction_hash,
            "blockNumber": self.block_number,
            "blockTime": self.block_time,
        }

    def to_json(self) -> str:
        """The document as a proof file (what `entryway verify` reads)."""
        return json.dumps(self.to_dict(), indent=2) + "\n"


ProofLike = Proof | Mapping[str, Any] | str | bytes


def parse_proof(proof: ProofLike) -> Proof:
    """A `Proof` from itself, its dict (the parsed JSON) or its JSON text."""
    if isinstance(proof, Proof):
        return proof
    if isinstance(proof, str | bytes):
        return Proof.from_json(proof)
    return Proof.from_dict(proof)


class ProofFailure(StrEnum):
    """Why a proof did not verify: the first check that failed."""

    MALFORMED = "malformed"  # not a well-formed entryway-proof/1 document
    UNSUPPORTED = "unsupported"  # another version or other hashing rules
    DOCUMENT_MISMATCH = "document_mismatch"  # the document's SHA-256 is not the leaf
    PATH_MISMATCH = "path_mismatch"  # the path does not lead from the leaf to the root
    OTHER_CHAIN = "other_chain"  # the RPC serves another chain than the proof's
    NO_CONTRACT = "no_contract"  # no code, or not a NotaryAnchor, at the proof's contract
    NOT_ANCHORED = "not_anchored"  # the contract never anchored the root
    ANCHOR_MISMATCH = "anchor_mismatch"  # anchored, but not at the proof's time/block/count
    TRANSACTION_MISMATCH = "transaction_mismatch"  # the transaction does not record it


@dataclass(frozen=True, slots=True)
class VerificationResult:
    """The outcome of a verification: `valid`, and `reason` (why not, or what was proven);
    `failure` classifies a failure; `checks` lists what passed, in order; `on_chain` says
    whether the anchor was checked on chain or only the offline checks ran."""

    valid: bool
    reason: str
    failure: ProofFailure | None = None
    checks: tuple[str, ...] = ()
    on_chain: bool = False
    proof: Proof | None = None

    def __bool__(self) -> bool:
        return self.valid


def verify_proof(proof: ProofLike, document: bytes | None = None) -> VerificationResult:
    """The offline checks: the proof is well formed and of a known version, the document (if
    given) hashes to its leaf, and its path leads from the leaf to its root. Needs no
    network; that the root is anchored is `verify_proof_on_chain`'s to check. A malformed
    proof gives an invalid result, not an exception."""
    try:
        parsed = parse_proof(proof)
    except UnsupportedProofError as exc:
        return VerificationResult(False, str(exc), ProofFailure.UNSUPPORTED)
    except ProofFormatError as exc:
        return VerificationResult(False, f"malformed proof: {exc}", ProofFailure.MALFORMED)
    checks = [f"proof is a well-formed {PROOF_VERSION} document"]

    def fail(reason: str, failure: ProofFailure) -> VerificationResult:
        return VerificationResult(False, reason, failure, tuple(checks), proof=parsed)

    if document is not None:
        actual = document_hash(document)
        if actual != parsed.leaf:
            return fail(
                f"document does not match the leaf: its sha256 is {actual}, the proof's leaf "
                f"is {parsed.leaf}",
                ProofFailure.DOCUMENT_MISMATCH,
            )
        checks.append(f"document's sha256 is the leaf {parsed.leaf}")
    path = [bytes.fromhex(s[2:]) for s in parsed.path]
    reached = root_from_path(bytes.fromhex(parsed.leaf[2:]), path)
    if reached != bytes.fromhex(parsed.root[2:]):
        return fail(
            f"path does not lead to the root: it leads to 0x{reached.hex()}, the proof's root "
            f"is {parsed.root}",
            ProofFailure.PATH_MISMATCH,
        )
    checks.append(f"path of {len(path)} hash(es) leads to the root {parsed.root}")
    subject = "the leaf" if document is None else "the document"
    return VerificationResult(
        True,
        f"{subject} is in the tree of the root (offline checks only: the anchor was not checked)",
        None,
        tuple(checks),
        proof=parsed,
    )


def _bytes32(value: bytes, what: str) -> bytes:
    if not isinstance(value, bytes) or len(value) != 32:
        raise ValueError(f"{what} must be 32 bytes, got {value!r:.80}")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    counts = Counter(k for k, _ in pairs)
    duplicates = sorted(k for k, n in counts.items() if n > 1)
    if duplicates:
        raise ProofFormatError(f"duplicate field(s) {', '.join(map(repr, duplicates))}")
    return dict(pairs)


def _hash(value: Any, name: str) -> str:
    if not isinstance(value, str) or not _HASH.fullmatch(value):
        raise ProofFormatError(f"{name!r} must be a 32-byte hash as 0x-prefixed hex")
    return value.lower()


def _integer(data: Mapping[str, Any], name: str, minimum: int, maximum: int | None = None) -> int:
    value = data[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProofFormatError(f"{name!r} must be an integer")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise ProofFormatError(f"{name!r} must be {bound}, got {value}")
    return value


def _address(value: Any, name: str) -> str:
    if not isinstance(value, str) or not _ADDRESS.fullmatch(value):
        raise ProofFormatError(f"{name!r} must be a 20-byte address as 0x-prefixed hex")
    digits = value[2:]
    canonical = str(to_checksum_address(value))
    if digits not in (digits.lower(), digits.upper()) and canonical != value:
        raise ProofFormatError(f"{name!r} has a wrong EIP-55 checksum: {value}")
    return canonical
