"""The notary's Merkle trees: the documented hashing rules, and every path verifying while
any tampering fails, for random trees."""

from __future__ import annotations

import hashlib

import pytest
from eth_utils.crypto import keccak as reference_keccak
from hypothesis import given, settings
from hypothesis import strategies as st

from entryway.domain import hashing
from entryway.domain.merkle import (
    MerkleTree,
    MerkleTreeError,
    leaf_hash,
    max_path_length,
    node_hash,
    root_from_path,
    verify_path,
)

hashes = st.binary(min_size=32, max_size=32)
trees = st.lists(hashes, min_size=1, max_size=70)


def doc(n: int) -> bytes:
    return hashlib.sha256(str(n).encode()).digest()


def ref_leaf(d: bytes) -> bytes:
    return bytes(reference_keccak(b"\x00" + d))


def ref_node(a: bytes, b: bytes) -> bytes:
    low, high = sorted((a, b))
    return bytes(reference_keccak(b"\x01" + low + high))


def flip(value: bytes, bit: int) -> bytes:
    return (int.from_bytes(value, "big") ^ (1 << bit)).to_bytes(len(value), "big")


@given(st.binary(max_size=300))
def test_keccak_hasher_agrees_with_an_independent_keccak(data: bytes) -> None:
    with hashing.keccak256_hasher() as hasher:
        assert hasher(data) == bytes(reference_keccak(data))
        assert hasher(data) == hasher(data)  # the reused state is reset between digests
    assert hashing.keccak256(data) == bytes(reference_keccak(data))


def test_trees_are_the_same_without_the_compiled_keccak(monkeypatch: pytest.MonkeyPatch) -> None:
    leaves = [doc(i) for i in range(37)]
    fast = MerkleTree.build(leaves)
    monkeypatch.setattr(hashing, "_compiled_keccak", lambda: None)
    assert MerkleTree.build(leaves) == fast


def test_the_documented_rules_give_this_root() -> None:
    """Five leaves, computed by hand from the rules with another Keccak implementation."""
    d = [doc(i) for i in range(5)]
    leaves = [ref_leaf(x) for x in d]
    level1 = [ref_node(leaves[0], leaves[1]), ref_node(leaves[2], leaves[3]), leaves[4]]
    level2 = [ref_node(level1[0], level1[1]), leaves[4]]  # the fifth leaf promoted twice
    root = ref_node(level2[0], level2[1])
    tree = MerkleTree.build(d)
    assert tree.root == root
    assert tree.levels == (tuple(leaves), tuple(level1), tuple(level2), (root,))
    assert tree.path(4) == (level2[0],)
    assert tree.path(1) == (leaves[0], level1[1], leaves[4])
    assert leaf_hash(d[0]) == leaves[0]
    assert node_hash(leaves[1], leaves[0]) == node_hash(leaves[0], leaves[1]) == level1[0]


def test_the_worked_example_in_docs_notary_md() -> None:
    tree = MerkleTree.build([hashlib.sha256(d).digest() for d in (b"a", b"b", b"c")])
    assert tree.root.hex() == "51cc237b8b42d6ada4a6ef53cbdc70c101a89a34b23f55c6aa4acb47117f564a"
    assert [p.hex() for p in tree.path(2)] == [
        "ca7fd6e7319fd16e783aafa95647323207c17e1e84f27d6d28b28f8319a34578"
    ]


def test_a_one_leaf_tree_is_its_leaf_with_an_empty_path() -> None:
    tree = MerkleTree.build([doc(7)])
    assert tree.root == ref_leaf(doc(7))
    assert tree.path(0) == ()
    assert verify_path(doc(7), (), tree.root)


def test_an_odd_last_node_is_promoted_not_duplicated() -> None:
    a, b, c = doc(1), doc(2), doc(3)
    assert MerkleTree.build([a, b, c]).root != MerkleTree.build([a, b, c, c]).root


def test_an_inner_node_cannot_pass_as_a_document() -> None:
    tree = MerkleTree.build([doc(i) for i in range(4)])
    inner, sibling = tree.levels[1]
    # Without the leaf prefix, (inner, [sibling]) would be a valid path to the root.
    assert ref_node(inner, sibling) == tree.root
    assert not verify_path(inner, (sibling,), tree.root)


@given(trees)
def test_every_leaf_has_a_path_to_the_root(leaves: list[bytes]) -> None:
    tree = MerkleTree.build(leaves)
    for index, leaf in enumerate(leaves):
        path = tree.path(index)
        assert len(path) <= max_path_length(len(leaves))
        assert verify_path(leaf, path, tree.root)
    assert list(tree.paths()) == [tree.path(i) for i in range(len(leaves))]


@given(trees, st.data())
def test_tampering_with_a_sibling_or_the_leaf_fails(
    leaves: list[bytes], data: st.DataObject
) -> None:
    tree = MerkleTree.build(leaves)
    index = data.draw(st.integers(0, len(leaves) - 1))
    path = list(tree.path(index))
    bit = data.draw(st.integers(0, 255))
    assert not verify_path(flip(leaves[index], bit), path, tree.root)
    assert not verify_path(leaves[index], path, flip(tree.root, bit))
    if path:
        at = data.draw(st.integers(0, len(path) - 1))
        tampered = [*path[:at], flip(path[at], bit), *path[at + 1 :]]
        assert not verify_path(leaves[index], tampered, tree.root)
        assert not verify_path(leaves[index], path[:-1], tree.root)  # a sibling dropped
    assert not verify_path(leaves[index], [*path, data.draw(hashes)], tree.root)


@settings(max_examples=5, deadline=None)
@given(st.integers(1000, 1100))
def test_larger_trees_keep_every_path_valid(count: int) -> None:
    leaves = [doc(i) for i in range(count)]
    tree = MerkleTree.build(leaves)
    assert len(tree.levels) == max_path_length(count) + 1
    assert all(root_from_path(leaves[i], tree.path(i)) == tree.root for i in range(count))


def test_bad_input_is_refused() -> None:
    with pytest.raises(MerkleTreeError, match="at least one leaf"):
        MerkleTree.build([])
    with pytest.raises(MerkleTreeError, match="document hash #1"):
        MerkleTree.build([doc(0), b"short"])
    with pytest.raises(MerkleTreeError, match="path entry"):
        root_from_path(doc(0), [doc(1)[:31]])
    with pytest.raises(IndexError):
        MerkleTree.build([doc(0)]).path(1)
    with pytest.raises(MerkleTreeError):
        max_path_length(0)


def test_max_path_length_is_the_ceiling_of_log2() -> None:
    assert [max_path_length(n) for n in (1, 2, 3, 4, 5, 8, 9, 100_000)] == [
        0,
        1,
        2,
        2,
        3,
        3,
        4,
        17,
    ]
