"""Binary Merkle trees over document hashes, for notarization. Pure.

Hashing rules (scheme `entryway-merkle/1`; proofs name it, see `domain/proof.py`):

- A **leaf** is a 32-byte document hash (SHA-256 of the document's bytes, see
  `domain/proof.document_hash`). Its node in the tree is
  `keccak256(0x00 || documentHash)`.
- An **inner node** is `keccak256(0x01 || min(a, b) || max(a, b))` over its two children,
  the smaller (as 32-byte big-endian numbers, i.e. byte strings) first. Sorting makes a
  proof a plain list of sibling hashes, with no left/right flags.
- The one-byte prefixes separate the two domains: a leaf's preimage is 33 bytes starting
  with 0x00, a node's 65 bytes starting with 0x01, so no inner node can be passed off as a
  leaf, nor a leaf as an inner node (the second-preimage attack on plain Merkle trees).
- Levels are built from the leaves up by pairing neighbours in order; when a level has an
  odd count, its last node has no partner and is **promoted unchanged** to the next level
  (it is not hashed with itself, so no two different leaf lists share a root by duplicating
  a last leaf). A promoted node contributes no sibling to a proof.
- The **root** is the single node of the top level. A one-leaf tree's root is that leaf's
  node, and its proof is empty.
- A **path** lists the siblings met from the leaf up to the root. Verification folds it:
  `node = leaf node; for s in path: node = inner(node, s)`, then compares with the root.

Duplicate document hashes may share a tree; each gets its own, valid, path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from entryway.domain.hashing import HashFunction, keccak256_hasher
from entryway.errors import EntrywayError

SCHEME = "entryway-merkle/1"
HASH_BYTES = 32
LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"


class MerkleTreeError(EntrywayError, ValueError):
    """A tree or path was given something that is not a list of 32-byte hashes."""


def _check_hash(value: bytes, what: str) -> None:
    if not isinstance(value, bytes) or len(value) != HASH_BYTES:
        raise MerkleTreeError(f"{what} must be {HASH_BYTES} bytes, got {value!r:.80}")


def _leaf(document_hash: bytes, hasher: HashFunction) -> bytes:
    return hasher(LEAF_PREFIX + document_hash)


def _inner(a: bytes, b: bytes, hasher: HashFunction) -> bytes:
    return hasher(NODE_PREFIX + a + b if a < b else NODE_PREFIX + b + a)


def leaf_hash(document_hash: bytes) -> bytes:
    """The tree node of one document hash: keccak256(0x00 || documentHash)."""
    _check_hash(document_hash, "a document hash")
    with keccak256_hasher() as hasher:
        return _leaf(document_hash, hasher)


def node_hash(a: bytes, b: bytes) -> bytes:
    """The parent of two nodes: keccak256(0x01 || min(a, b) || max(a, b))."""
    _check_hash(a, "a node")
    _check_hash(b, "a node")
    with keccak256_hasher() as hasher:
        return _inner(a, b, hasher)


def root_from_path(document_hash: bytes, path: Sequence[bytes]) -> bytes:
    """The root that `path` leads to from `document_hash`'s leaf."""
    _check_hash(document_hash, "a document hash")
    for sibling in path:
        _check_hash(sibling, "a path entry")
    with keccak256_hasher() as hasher:
        node = _leaf(document_hash, hasher)
        for sibling in path:
            node = _inner(node, sibling, hasher)
    return node


def verify_path(document_hash: bytes, path: Sequence[bytes], root: bytes) -> bool:
    """Whether `path` leads from `document_hash`'s leaf to `root`."""
    _check_hash(root, "a root")
    return root_from_path(document_hash, path) == root


def max_path_length(leaf_count: int) -> int:
    """The most siblings a path can hold in a tree of `leaf_count` leaves: ceil(log2 n)."""
    if leaf_count < 1:
        raise MerkleTreeError("a tree has at least one leaf")
    return (leaf_count - 1).bit_length()


@dataclass(frozen=True, slots=True)
class MerkleTree:
    """A built tree: every level kept, so each leaf's path is read off without hashing."""

    document_hashes: tuple[bytes, ...]
    levels: tuple[tuple[bytes, ...], ...]  # levels[0]: leaf nodes; levels[-1]: (root,)

    @classmethod
    def build(cls, document_hashes: Iterable[bytes]) -> MerkleTree:
        inputs = tuple(document_hashes)
        if not inputs:
            raise MerkleTreeError("a tree has at least one leaf")
        for index, value in enumerate(inputs):
            _check_hash(value, f"document hash #{index}")
        with keccak256_hasher() as hasher:
            level = [hasher(LEAF_PREFIX + d) for d in inputs]
            levels = [tuple(level)]
            while len(level) > 1:
                level = _parents(level, hasher)
                levels.append(tuple(level))
        return cls(inputs, tuple(levels))

    @property
    def root(self) -> bytes:
        return self.levels[-1][0]

    @property
    def leaf_count(self) -> int:
        return len(self.document_hashes)

    def path(self, index: int) -> tuple[bytes, ...]:
        """The siblings from leaf `index` up to the root (promoted levels give none)."""
        if not 0 <= index < self.leaf_count:
            raise IndexError(f"leaf {index} is not in a tree of {self.leaf_count}")
        siblings = []
        for level in self.levels[:-1]:
            partner = index ^ 1
            if partner < len(level):
                siblings.append(level[partner])
            index >>= 1
        return tuple(siblings)

    def paths(self) -> Iterator[tuple[bytes, ...]]:
        """Every leaf's path, in leaf order."""
        return (self.path(i) for i in range(self.leaf_count))


def _parents(level: Sequence[bytes], hasher: HashFunction) -> list[bytes]:
    paired = len(level) - len(level) % 2
    parents = [_inner(level[i], level[i + 1], hasher) for i in range(0, paired, 2)]
    if paired < len(level):
        parents.append(level[-1])  # odd one out: promoted unchanged
    return parents
