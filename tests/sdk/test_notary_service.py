"""Notarization through the SDK against a running `entryway up`: documents and hashes in,
direct and batched, proofs out, verified offline and on the devnet's chain; tampered
documents, forged anchors and the RPC of another chain fail with their reason.

The batched notarizations are sent when the module starts and checked by its last test, so
the batch interval (10 s) runs while the direct tests do."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from entryway_sdk import (
    BulkNotarization,
    Entryway,
    EntrywaySync,
    Notarization,
    Proof,
    ProofFailure,
    document_hash,
    verify_proof,
    verify_proof_on_chain,
)

from entryway.domain.merkle import MerkleTree
from tests.sdk.conftest import Service

pytestmark = pytest.mark.anvil


@dataclass(frozen=True)
class Batched:
    document: bytes
    notarization: Notarization
    bulk: BulkNotarization


@dataclass(frozen=True)
class Direct:
    document: bytes
    notarization: Notarization
    proof: Proof


def fresh_document(what: str) -> bytes:
    return f"{what} {secrets.token_hex(16)}".encode()


@pytest.fixture(scope="module")
async def client(service: Service) -> AsyncIterator[Entryway]:
    async with await Entryway.init(
        api_key=service.api_key,
        rpc_url=service.rpc_url(80002),
        chain_id=80002,
        base_url=service.url,
    ) as client:
        yield client


@pytest.fixture(scope="module", autouse=True)
async def batched(client: Entryway) -> Batched:
    """Sent first: a document and three hashes waiting for the next batch."""
    document = fresh_document("batched contract")
    n = await client.notarize_document(document, label="batched", metadata={"k": 1})
    hashes = [document_hash(fresh_document(f"batched hash {i}")) for i in range(3)]
    return Batched(document, n, await client.notarize_hashes(hashes))


@pytest.fixture(scope="module")
async def direct(client: Entryway) -> Direct:
    document = fresh_document("direct contract")
    n = await client.notarize_document(
        document, label="contract 7", metadata={"client": "ACME"}, mode="direct", store=True,
        filename="contract.txt", content_type="text/plain",
    )  # fmt: skip
    return Direct(document, n, await n.wait_for_proof(timeout=30, poll_interval=0.2))


async def test_a_direct_document_is_anchored_alone_and_verifies(
    client: Entryway, direct: Direct, service: Service
) -> None:
    n, proof = direct.notarization, direct.proof
    assert n.document_hash == document_hash(direct.document) == proof.leaf
    # 500 + 10 x 1 KiB x 2 steps: the leaf against the root, and the service's hashing
    assert n.credits == 520 and n.accepted is not None and n.accepted.kind == "document"
    assert proof.leaf_count == 1 and proof.path == ()  # a tree of its own
    assert proof.chain_id == 80002 and proof.contract == client.defaults.notary
    status = await n.status()
    assert status.status == "anchored" and status.mode == "direct" and status.proof == proof
    assert status.label == "contract 7" and status.metadata == {"client": "ACME"}
    assert status.anchor is not None and status.anchor.root == proof.root
    assert status.anchor.block_time == proof.block_time
    assert await n.document() == direct.document

    offline = verify_proof(proof.to_dict(), direct.document)
    assert offline.valid and not offline.on_chain
    result = await client.verify_proof(proof, direct.document)
    assert result.valid and result.on_chain, result.reason
    assert result.reason.startswith("the document is in a root anchored on chain 80002 at ")
    assert any("emitted Anchored" in check for check in result.checks)
    by_url = await verify_proof_on_chain(proof.to_json(), service.rpc_url(80002))
    assert by_url.valid and by_url.on_chain


async def test_a_tampered_document_fails(client: Entryway, direct: Direct) -> None:
    result = await client.verify_proof(direct.proof, direct.document + b" (amended)")
    assert not result.valid and result.failure is ProofFailure.DOCUMENT_MISMATCH
    assert result.reason.startswith("document does not match the leaf")


async def test_the_rpc_of_another_chain_fails(direct: Direct, service: Service) -> None:
    result = await verify_proof_on_chain(direct.proof, service.rpc_url(84532))
    assert not result.valid and result.failure is ProofFailure.OTHER_CHAIN
    assert result.reason == "root is for chain 80002, RPC is chain 84532"


async def test_forged_anchors_fail_on_chain(client: Entryway, direct: Direct) -> None:
    proof = direct.proof
    later = dataclasses.replace(proof, block_time=proof.block_time + 1)
    result = await client.verify_proof(later)
    assert result.failure is ProofFailure.ANCHOR_MISMATCH
    assert result.reason == (
        f"root was anchored at block time {proof.block_time}, the proof says {proof.block_time + 1}"
    )
    # A well-formed proof of a tree nobody anchored: valid offline, not on chain.
    leaf = bytes.fromhex(document_hash(fresh_document("never notarized"))[2:])
    root = "0x" + MerkleTree.build([leaf]).root.hex()
    unanchored = dataclasses.replace(proof, leaf="0x" + leaf.hex(), root=root)
    assert verify_proof(unanchored).valid
    result = await client.verify_proof(unanchored)
    assert result.failure is ProofFailure.NOT_ANCHORED
    assert result.reason == f"root not anchored on chain 80002 (NotaryAnchor {proof.contract})"
    missing_tx = dataclasses.replace(proof, transaction_hash="0x" + "ab" * 32)
    result = await client.verify_proof(missing_tx)
    assert result.failure is ProofFailure.TRANSACTION_MISMATCH and "not found" in result.reason
    assert (await client.verify_proof(missing_tx, check_transaction=False)).valid
    not_notary = dataclasses.replace(proof, contract=client.defaults.entry_point)
    assert (await client.verify_proof(not_notary)).failure is ProofFailure.NO_CONTRACT


async def test_a_direct_bulk_is_one_tree_in_one_transaction(
    client: Entryway, direct: Direct
) -> None:
    hashes = [document_hash(fresh_document(f"bulk {i}")) for i in range(3)]
    bulk = await client.notarize_hashes(hashes, mode="direct")
    assert [n.document_hash for n in bulk] == hashes and bulk.credits == 3 * 530
    proofs = await bulk.wait_for_proofs(timeout=30, poll_interval=0.2)
    # each hash: 500 + 10 x 1 KiB x (1 + 2), its steps the longest proof of the 3 hashes' tree
    assert max(len(p.path) for p in proofs) == 2
    assert {(p.root, p.transaction_hash, p.leaf_count) for p in proofs} == {
        (proofs[0].root, proofs[0].transaction_hash, 3)
    }
    for p in proofs:
        assert (await client.verify_proof(p)).valid
    # Another anchor's transaction does not record this root.
    borrowed = dataclasses.replace(direct.proof, transaction_hash=proofs[0].transaction_hash)
    result = await client.verify_proof(borrowed)
    assert result.failure is ProofFailure.TRANSACTION_MISMATCH
    assert result.reason == (
        f"transaction {proofs[0].transaction_hash} is in block {proofs[0].block_number}, "
        f"the proof says {direct.proof.block_number}"
    )


def test_the_blocking_client_notarizes(service: Service) -> None:
    document = fresh_document("blocking")
    with EntrywaySync.init(
        api_key=service.api_key,
        rpc_url=service.rpc_url(84532),
        chain_id=84532,
        base_url=service.url,
    ) as client:
        n = client.notarize_hash(document_hash(document), mode="direct")
        proof = n.wait_for_proof(timeout=30, poll_interval=0.2)
        assert proof.chain_id == 84532 and n.status().status == "anchored"
        assert client.verify_proof(proof, document).valid


async def test_batched_notarizations_share_one_anchored_batch(
    client: Entryway, batched: Batched
) -> None:
    n, bulk = batched.notarization, batched.bulk
    proof = await n.wait_for_proof(timeout=30, poll_interval=0.25)
    others = await bulk.wait_for_proofs(timeout=30, poll_interval=0.25)
    assert {p.root for p in others} == {proof.root} and proof.leaf_count >= 4
    assert len({p.leaf for p in [proof, *others]}) == 4
    assert (await n.status()).mode == "batched"
    result = await client.verify_proof(proof, batched.document)
    assert result.valid, result.reason
    for p in others:
        assert (await client.verify_proof(p)).valid
    tampered = await client.verify_proof(proof, batched.document.upper())
    assert tampered.failure is ProofFailure.DOCUMENT_MISMATCH
