"""Proof-of-inclusion documents: round trips, strict parsing, offline verification."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from entryway.domain.merkle import MerkleTree
from entryway.domain.proof import (
    HASHING_RULES,
    PROOF_VERSION,
    AnchorRecord,
    InclusionProof,
    ProofFormatError,
    UnsupportedProofError,
    document_hash,
    proof_for_leaf,
    verify_offline,
)

NOTARY = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
ANCHOR = AnchorRecord(
    chain_id=80002,
    contract=NOTARY,
    transaction_hash=bytes(range(32)),
    block_number=42,
    block_time=1_767_225_600,
)
documents = st.lists(st.binary(max_size=64), min_size=1, max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=10,
)


def proofs_of(docs: list[bytes]) -> list[InclusionProof]:
    tree = MerkleTree.build([document_hash(d) for d in docs])
    return [proof_for_leaf(tree, i, ANCHOR) for i in range(len(docs))]


def sample() -> dict[str, Any]:
    return proofs_of([b"alpha", b"beta", b"gamma"])[1].to_dict()


def test_document_hash_is_sha256_of_the_bytes() -> None:
    assert document_hash(b"abc") == bytes.fromhex(
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


def test_a_proof_document_has_the_documented_shape() -> None:
    data = sample()
    assert data["version"] == PROOF_VERSION == "entryway-proof/1"
    assert data["hashing"] == {
        "scheme": "entryway-merkle/1",
        "document": "sha256",
        "leaf": "keccak256(0x00 || leaf)",
        "node": "keccak256(0x01 || min(a, b) || max(a, b))",
        "oddNode": "promoted",
    }
    assert data["leaf"] == "0x" + hashlib.sha256(b"beta").hexdigest()
    assert data["leafCount"] == 3
    assert len(data["path"]) == 2
    assert data["contract"] == NOTARY
    assert data["transactionHash"] == "0x" + bytes(range(32)).hex()
    assert (data["chainId"], data["blockNumber"], data["blockTime"]) == (80002, 42, 1_767_225_600)


@given(documents)
def test_every_documents_proof_round_trips_and_verifies(docs: list[bytes]) -> None:
    for doc, proof in zip(docs, proofs_of(docs), strict=True):
        assert InclusionProof.from_json(proof.to_json()) == proof
        result = verify_offline(json.loads(proof.to_json()), doc)
        assert result.valid, result.reason
        assert verify_offline(proof).valid


@given(documents, st.data())
def test_another_document_or_a_tampered_path_fails_with_its_reason(
    docs: list[bytes], data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(docs) - 1))
    proof = proofs_of(docs)[index]
    other = data.draw(st.binary(max_size=64).filter(lambda b: b != docs[index]))
    result = verify_offline(proof, other)
    assert not result.valid
    assert result.reason.startswith("document does not match the leaf")

    mangled = proof.to_dict()
    if mangled["path"]:
        at = data.draw(st.integers(0, len(mangled["path"]) - 1))
        mangled["path"][at] = "0x" + data.draw(st.binary(min_size=32, max_size=32)).hex()
    else:
        mangled["root"] = "0x" + bytes(32).hex()
    result = verify_offline(mangled, docs[index])
    if mangled["path"] == proof.to_dict()["path"] and mangled["root"] == proof.to_dict()["root"]:
        return  # drew the very same sibling
    assert not result.valid
    assert result.reason == "path does not lead to the root"


def test_a_proof_of_another_version_is_unsupported() -> None:
    data = sample() | {"version": "entryway-proof/2"}
    with pytest.raises(UnsupportedProofError):
        InclusionProof.from_dict(data)
    result = verify_offline(data)
    assert not result.valid
    assert result.reason.startswith("unsupported proof version 'entryway-proof/2'")


def test_other_hashing_rules_are_unsupported() -> None:
    data = sample()
    data["hashing"] = dict(HASHING_RULES) | {"node": "keccak256(a || b)"}
    result = verify_offline(data)
    assert not result.valid
    assert result.reason.startswith("unsupported hashing rules")


def _set(key: str, value: Any) -> Any:
    def mutate(data: dict[str, Any]) -> None:
        data[key] = value

    return mutate


def _delete(key: str) -> Any:
    return lambda data: data.pop(key)


MALFORMED = {
    "missing version": (_delete("version"), "missing field 'version'"),
    "missing root": (_delete("root"), "missing field(s) 'root'"),
    "extra field": (_set("note", "hi"), "unexpected field(s) 'note'"),
    "short leaf": (_set("leaf", "0x1234"), "'leaf' must be a 32-byte hash"),
    "leaf without 0x": (_set("leaf", "ab" * 32), "'leaf' must be a 32-byte hash"),
    "non-hex root": (_set("root", "0x" + "zz" * 32), "'root' must be a 32-byte hash"),
    "path not a list": (_set("path", "0x" + "00" * 32), "'path' must be a list"),
    "bad path entry": (_set("path", [1]), "'path[0]' must be a 32-byte hash"),
    "chain id as text": (_set("chainId", "80002"), "'chainId' must be an integer"),
    "chain id as bool": (_set("chainId", True), "'chainId' must be an integer"),
    "block number float": (_set("blockNumber", 42.0), "'blockNumber' must be an integer"),
    "negative block": (_set("blockNumber", -1), "'blockNumber' must be >= 0"),
    "zero block time": (_set("blockTime", 0), "'blockTime' must be >= 1"),
    "zero leaves": (_set("leafCount", 0), "'leafCount' must be between 1 and"),
    "path too long": (_set("leafCount", 1), "a tree of 1 leaves has paths of at most 0"),
    "short address": (_set("contract", "0x1234"), "'contract' must be a 20-byte address"),
    "bad checksum": (
        _set("contract", NOTARY.replace("F", "f", 1)),
        "'contract' has a wrong EIP-55 checksum",
    ),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_documents_are_refused_with_a_clear_reason(name: str) -> None:
    mutate, message = MALFORMED[name]
    data = copy.deepcopy(sample())
    mutate(data)
    with pytest.raises(ProofFormatError) as caught:
        InclusionProof.from_dict(data)
    assert message in str(caught.value)
    result = verify_offline(data)
    assert not result.valid
    assert message in result.reason


def test_lower_case_addresses_are_accepted_and_checksummed() -> None:
    data = sample() | {"contract": NOTARY.lower()}
    assert InclusionProof.from_dict(data).anchor.contract == NOTARY


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ("[]", "a proof is a JSON object"),
        ('{"version": "entryway-proof/1", "version": "entryway-proof/1"}', "duplicate field"),
        (b"\xff\xfe", "not JSON"),
    ],
)
def test_text_that_is_no_proof_is_refused(text: str | bytes, message: str) -> None:
    with pytest.raises(ProofFormatError, match=message):
        InclusionProof.from_json(text)


@given(st.dictionaries(st.sampled_from(sorted(sample())), json_values, max_size=11))
def test_arbitrary_json_is_parsed_or_refused_never_crashes(fields: dict[str, Any]) -> None:
    data = sample() | fields
    try:
        proof = InclusionProof.from_dict(data)
    except ProofFormatError:
        assert not verify_offline(data).valid
        return
    assert InclusionProof.from_dict(proof.to_dict()) == proof
