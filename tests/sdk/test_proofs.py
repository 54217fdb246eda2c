"""The SDK's offline proof verification against vectors made by the service's own code (the
SDK is written from docs/notary.md and imports none of it), and tampered proofs."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from entryway_sdk import (
    PROOF_VERSION,
    Proof,
    ProofFailure,
    ProofFormatError,
    UnsupportedProofError,
    document_hash,
    verify_proof,
)
from entryway_sdk.proof import inner_node, leaf_node, root_from_path
from hypothesis import given, settings
from hypothesis import strategies as st

from entryway.domain.merkle import MerkleTree
from entryway.domain.proof import AnchorRecord, proof_for_leaf, verify_offline
from entryway.domain.proof import document_hash as service_document_hash

ANCHOR = AnchorRecord(
    chain_id=80002,
    contract="0x9D46B2548D80239044E232c32B01844f82F54723",
    transaction_hash=bytes.fromhex("ab" * 32),
    block_number=1234,
    block_time=1795305600,
)
DOCS = [b"a", b"b", b"c"]  # docs/notary.md's worked example
ROOT_ABC = "0x51cc237b8b42d6ada4a6ef53cbdc70c101a89a34b23f55c6aa4acb47117f564a"
NODE_AB = "0xca7fd6e7319fd16e783aafa95647323207c17e1e84f27d6d28b28f8319a34578"


def service_proofs(documents: list[bytes]) -> list[dict[str, Any]]:
    """The proofs the service hands out for a batch of `documents`."""
    tree = MerkleTree.build(service_document_hash(d) for d in documents)
    return [proof_for_leaf(tree, i, ANCHOR).to_dict() for i in range(tree.leaf_count)]


def test_the_worked_example_of_the_docs() -> None:
    proofs = service_proofs(DOCS)
    assert document_hash(b"c") == proofs[2]["leaf"]
    assert proofs[2]["path"] == [NODE_AB] and proofs[2]["root"] == ROOT_ABC  # c promoted
    for document, proof in zip(DOCS, proofs, strict=True):
        result = verify_proof(proof, document)
        assert result.valid and result.failure is None, result.reason
        assert not result.on_chain and "offline checks only" in result.reason
    # The SDK's own hashing gives the same nodes.
    leaves = [leaf_node(bytes.fromhex(document_hash(d)[2:])) for d in DOCS]
    assert "0x" + inner_node(leaves[1], leaves[0]).hex() == NODE_AB
    assert "0x" + inner_node(inner_node(leaves[0], leaves[1]), leaves[2]).hex() == ROOT_ABC


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 7, 8, 9, 16, 33])
def test_every_proof_of_a_service_tree_verifies_and_round_trips(count: int) -> None:
    documents = [f"document {i}".encode() for i in range(count)]
    for document, raw in zip(documents, service_proofs(documents), strict=True):
        proof = Proof.from_dict(raw)
        assert proof.to_dict() == raw
        assert json.loads(proof.to_json()) == raw
        assert Proof.from_json(json.dumps(raw)) == proof
        assert proof.document_hash == document_hash(document)
        assert verify_proof(raw, document).valid
    if count == 1:  # a tree of one leaf: the root is the leaf's node, the path empty
        assert raw["path"] == []
        assert raw["root"] == "0x" + leaf_node(bytes.fromhex(raw["leaf"][2:])).hex()


@settings(max_examples=60, deadline=None)
@given(
    hashes=st.lists(st.binary(min_size=32, max_size=32), min_size=1, max_size=40),
    data=st.data(),
)
def test_the_sdk_folds_paths_as_the_service_builds_trees(hashes: list[bytes], data: Any) -> None:
    tree = MerkleTree.build(hashes)
    index = data.draw(st.integers(0, len(hashes) - 1))
    assert root_from_path(hashes[index], list(tree.path(index))) == tree.root
    raw = proof_for_leaf(tree, index, ANCHOR).to_dict()
    tampered = copy.deepcopy(raw)
    if tampered["path"]:
        position = data.draw(st.integers(0, len(tampered["path"]) - 1))
        tampered["path"][position] = "0x" + bytes(32).hex()
    else:
        tampered["root"] = "0x" + bytes(32).hex()
    for proof in (raw, tampered):  # the SDK and the service agree, both ways
        assert verify_proof(proof).valid == verify_offline(proof).valid
    assert not verify_proof(tampered).valid


def flip(value: str) -> str:
    """`value` with its last hex digit changed."""
    return value[:-1] + ("1" if value[-1] == "0" else "0")


def proof_of(index: int = 0, count: int = 5) -> dict[str, Any]:
    return service_proofs([f"document {i}".encode() for i in range(count)])[index]


def test_a_tampered_document_does_not_match_the_leaf() -> None:
    result = verify_proof(proof_of(), b"document 0, edited")
    assert not result.valid and result.failure is ProofFailure.DOCUMENT_MISMATCH
    assert result.reason.startswith("document does not match the leaf: its sha256 is 0x")


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda p: p["path"].reverse(), id="siblings-reordered"),
        pytest.param(lambda p: p["path"].pop(), id="sibling-dropped"),
        pytest.param(lambda p: p["path"].__setitem__(0, flip(p["path"][0])), id="one-digit"),
        pytest.param(lambda p: p.update(root="0x" + "11" * 32), id="other-root"),
        pytest.param(lambda p: p.update(leaf=document_hash(b"another")), id="other-leaf"),
    ],
)
def test_a_tampered_path_does_not_lead_to_the_root(tamper: Any) -> None:
    raw = proof_of(index=1, count=8)  # three siblings
    tamper(raw)
    result = verify_proof(raw)
    assert not result.valid and result.failure is ProofFailure.PATH_MISMATCH
    assert result.reason.startswith("path does not lead to the root")


def test_an_inner_node_cannot_pass_for_a_document_hash() -> None:
    hashes = [service_document_hash(f"d{i}".encode()) for i in range(4)]
    tree = MerkleTree.build(hashes)
    raw = proof_for_leaf(tree, 0, ANCHOR).to_dict()
    # Present node(d0, d1) as a leaf with node(d2, d3) as its path: unprefixed trees accept it.
    raw.update(leaf="0x" + tree.levels[1][0].hex(), path=["0x" + tree.levels[1][1].hex()])
    assert verify_proof(raw).failure is ProofFailure.PATH_MISMATCH


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"leaf": "0x1234"}, "'leaf' must be a 32-byte hash"),
        ({"path": "0x" + "00" * 32}, "'path' must be a list"),
        ({"leafCount": True}, "'leafCount' must be an integer"),
        ({"leafCount": 0}, "'leafCount' must be between 1 and 4294967295"),
        ({"blockTime": "1795305600"}, "'blockTime' must be an integer"),
        ({"chainId": 0}, "'chainId' must be >= 1"),
        ({"contract": "0x9d46B2548D80239044E232c32B01844f82F54723"}, "wrong EIP-55 checksum"),
        ({"leafCount": 2}, "a tree of 2 leaves has paths of at most 1"),
        ({"signature": "0x"}, "unexpected field(s) 'signature'"),
    ],
)
def test_a_malformed_proof_is_invalid_with_what_is_wrong(
    change: dict[str, Any], message: str
) -> None:
    raw = proof_of() | change
    result = verify_proof(raw)
    assert not result.valid and result.failure is ProofFailure.MALFORMED
    assert message in result.reason, result.reason
    with pytest.raises(ProofFormatError) as caught:
        Proof.from_dict(raw)
    assert message in str(caught.value)


def test_a_missing_field_is_named() -> None:
    raw = proof_of()
    del raw["blockTime"]
    assert verify_proof(raw).reason == "malformed proof: missing field(s) 'blockTime'"


def test_other_versions_and_hashing_rules_are_unsupported() -> None:
    raw = proof_of() | {"version": "entryway-proof/2"}
    result = verify_proof(raw)
    assert result.failure is ProofFailure.UNSUPPORTED
    assert result.reason.startswith("unsupported proof version 'entryway-proof/2'")
    with pytest.raises(UnsupportedProofError):
        Proof.from_dict(raw)
    rules = proof_of()
    rules["hashing"]["oddNode"] = "duplicated"
    assert verify_proof(rules).failure is ProofFailure.UNSUPPORTED


def test_proof_files_are_parsed_strictly() -> None:
    text = json.dumps(proof_of())
    assert verify_proof(text).valid and verify_proof(text.encode()).valid
    duplicated = text[:-1] + ', "root": "0x' + "00" * 32 + '"}'
    assert verify_proof(duplicated).reason == "malformed proof: duplicate field(s) 'root'"
    assert verify_proof("{not json").failure is ProofFailure.MALFORMED
    assert Proof.from_dict(proof_of()).to_dict()["version"] == PROOF_VERSION


def test_upper_case_hex_is_read() -> None:
    raw = proof_of()
    raw["root"] = "0x" + raw["root"][2:].upper()
    assert verify_proof(raw).valid
