"""Notarization end to end on anvil: a batch of documents anchored through NotaryAnchor, its
proofs verified offline, on chain and with `entryway verify`; each forgery fails with its
reason."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.devnet.anvil import AnvilConfig, AnvilProcess, free_port
from entryway.devnet.devnet import Devnet
from entryway.domain.evm import to_hex
from entryway.domain.merkle import MerkleTree
from entryway.domain.proof import InclusionProof, document_hash, proof_for_leaf
from entryway.notary.anchor import AnchoredBatch, Anchorer, AnchorError
from entryway.notary.verify import verify_on_chain, verify_proof
from tests.integration.conftest import CHAIN_ID
from tests.integration.harness import ETHER, NOTARY, Harness

ENTRYWAY = str(Path(sys.executable).with_name("entryway"))
OTHER_CHAIN_ID = 84532


@pytest.fixture(scope="module")
def documents() -> list[bytes]:
    run = os.urandom(8).hex()  # fresh roots even on a devnet that outlives one run
    return [f"contract #{i} of run {run}\n".encode() * (i + 1) for i in range(25)]


@pytest.fixture(scope="module")
async def anchorer(devnet: Devnet, eth: EthClient) -> Anchorer:
    submitter = Transactor(eth, devnet.keys.notary_submitter, CHAIN_ID)
    return Anchorer(submitter, devnet.chains[0].deployment.notary)


@pytest.fixture(scope="module")
async def batch(anchorer: Anchorer, documents: list[bytes]) -> AnchoredBatch:
    return await anchorer.anchor_batch(document_hash(d) for d in documents)


@pytest.fixture(scope="module")
async def other_chain() -> AsyncIterator[EthClient]:
    node = AnvilProcess(AnvilConfig(chain_id=OTHER_CHAIN_ID))
    await node.start()
    try:
        async with JsonRpcClient(node.rpc_url) as rpc:
            yield EthClient(rpc)
    finally:
        await node.stop()


def edited(proof: InclusionProof, **anchor: object) -> InclusionProof:
    return dataclasses.replace(proof, anchor=dataclasses.replace(proof.anchor, **anchor))  # type: ignore[arg-type]


async def test_a_batch_is_anchored_with_the_block_that_holds_it(
    batch: AnchoredBatch, eth: EthClient, devnet: Devnet
) -> None:
    notary = devnet.chains[0].deployment.notary
    anchor = batch.anchor
    assert (anchor.chain_id, anchor.contract) == (CHAIN_ID, notary)
    block = await eth.get_block(hex(anchor.block_number))
    assert anchor.block_time == int(block["timestamp"], 16)
    assert to_hex(anchor.transaction_hash) in block["transactions"]
    raw = await eth.call(notary, NOTARY.encode_call("anchorOf", batch.tree.root))
    assert NOTARY.decode_output("anchorOf", raw)[0] == (anchor.block_time, anchor.block_number, 25)


async def test_anchoring_the_same_root_again_returns_the_first_anchor(
    batch: AnchoredBatch, anchorer: Anchorer, eth: EthClient
) -> None:
    head = await eth.block_number()
    assert await anchorer.anchor(batch.tree.root, batch.tree.leaf_count) == batch.anchor
    assert await eth.block_number() == head  # nothing sent


async def test_a_key_the_contract_does_not_accept_cannot_anchor(
    harness: Harness, devnet: Devnet, eth: EthClient
) -> None:
    stranger = harness.new_key()
    await harness.fund(stranger.address, ETHER)
    anchorer = Anchorer(Transactor(eth, stranger, CHAIN_ID), devnet.chains[0].deployment.notary)
    with pytest.raises(AnchorError, match="failed"):
        await anchorer.anchor(os.urandom(32), 3)
    with pytest.raises(AnchorError, match="not all zero"):
        await anchorer.anchor(bytes(32), 3)


async def test_each_documents_proof_verifies_offline_and_on_chain(
    batch: AnchoredBatch, documents: list[bytes], eth: EthClient
) -> None:
    proofs = batch.proofs()
    assert [p.leaf for p in proofs] == [document_hash(d) for d in documents]
    for proof, document in zip(proofs, documents, strict=True):
        assert (await verify_proof(proof, document_bytes=document)).valid
    result = await verify_proof(proofs[7].to_dict(), document_bytes=documents[7], eth=eth)
    assert result.valid, result.reason
    assert result.reason == "the document is in a root anchored on chain 80002"
    assert any("emitted Anchored" in check for check in result.checks)


async def test_a_tampered_document_fails(
    batch: AnchoredBatch, documents: list[bytes], eth: EthClient
) -> None:
    result = await verify_proof(batch.proof(3), document_bytes=documents[3] + b" ", eth=eth)
    assert not result.valid
    assert result.reason.startswith("document does not match the leaf")


async def test_a_tampered_path_fails(
    batch: AnchoredBatch, documents: list[bytes], eth: EthClient
) -> None:
    proof = batch.proof(3)
    forged = dataclasses.replace(proof, path=(os.urandom(32), *proof.path[1:]))
    result = await verify_proof(forged, document_bytes=documents[3], eth=eth)
    assert not result.valid
    assert result.reason == "path does not lead to the root"


async def test_a_root_never_anchored_fails(batch: AnchoredBatch, eth: EthClient) -> None:
    tree = MerkleTree.build([document_hash(b"never notarized"), document_hash(os.urandom(9))])
    forged = proof_for_leaf(tree, 0, batch.anchor)  # claims the real batch's anchor
    result = await verify_proof(forged, document_bytes=b"never notarized", eth=eth)
    assert not result.valid
    assert result.reason.startswith("root not anchored on chain 80002")


async def test_a_proof_checked_on_another_chain_fails(
    batch: AnchoredBatch, other_chain: EthClient, eth: EthClient
) -> None:
    result = await verify_proof(batch.proof(0), eth=other_chain)
    assert not result.valid
    assert result.reason == "root is for chain 80002, RPC is chain 84532"
    result = await verify_on_chain(edited(batch.proof(0), chain_id=OTHER_CHAIN_ID), eth)
    assert result.reason == "root is for chain 84532, RPC is chain 80002"


async def test_an_anchor_that_does_not_match_the_chain_fails(
    batch: AnchoredBatch, eth: EthClient, anchorer: Anchorer
) -> None:
    proof, anchor = batch.proof(0), batch.anchor
    later = await anchorer.anchor(os.urandom(32), 1)  # automine: a block of its own
    assert later.block_number > anchor.block_number
    cases = {
        "root was anchored at block time": edited(proof, block_time=anchor.block_time + 1),
        "root was anchored in block": edited(proof, block_number=anchor.block_number - 1),
        "root was anchored with leaf count 25, the proof says 26": dataclasses.replace(
            proof, leaf_count=26
        ),
        "not found on chain 80002": edited(proof, transaction_hash=os.urandom(32)),
        f"is in block {later.block_number}, the proof says {anchor.block_number}": edited(
            proof, transaction_hash=later.transaction_hash
        ),
        "no contract at": edited(proof, contract="0x" + "11" * 20),
    }
    for reason, forged in cases.items():
        result = await verify_on_chain(forged, eth)
        assert not result.valid
        assert reason in result.reason, (reason, result.reason)


async def test_a_transaction_that_anchored_another_root_proves_nothing(
    harness: Harness, devnet: Devnet, eth: EthClient
) -> None:
    """Two roots anchored in one block: each proof must name its own transaction."""
    notary = devnet.chains[0].deployment.notary
    second_key = harness.new_key()
    await harness.fund(second_key.address, ETHER)
    allow = NOTARY.encode_call("setSubmitter", second_key.address, True)
    await harness.send_from(harness.operator, notary, allow)
    first = Anchorer(Transactor(eth, devnet.keys.notary_submitter, CHAIN_ID), notary)
    second = Anchorer(Transactor(eth, second_key, CHAIN_ID), notary)
    tree = MerkleTree.build([document_hash(os.urandom(16))])
    await eth.rpc.request("evm_setAutomine", [False])
    try:
        sends = [
            asyncio.create_task(first.anchor(tree.root, 1)),
            asyncio.create_task(second.anchor(os.urandom(32), 1)),
        ]
        for _ in range(200):
            if int((await eth.rpc.request("txpool_status"))["pending"], 16) == 2:
                break
            await asyncio.sleep(0.05)
        await eth.rpc.request("evm_mine", [])
        mine, theirs = await asyncio.gather(*sends)
    finally:
        await eth.rpc.request("evm_setAutomine", [True])
    assert mine.block_number == theirs.block_number
    proof = proof_for_leaf(tree, 0, mine)
    assert (await verify_on_chain(proof, eth)).valid
    result = await verify_on_chain(edited(proof, transaction_hash=theirs.transaction_hash), eth)
    assert not result.valid
    assert result.reason.endswith("emitted no Anchored event for the root")


async def run_cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        ENTRYWAY,
        "verify",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_entryway_verify_exit_status_says_whether_a_proof_holds(
    batch: AnchoredBatch, documents: list[bytes], devnet: Devnet, tmp_path: Path
) -> None:
    rpc_url = devnet.chains[0].rpc_url
    proof_file, document, forged = tmp_path / "proof.json", tmp_path / "doc", tmp_path / "forged"
    proof_file.write_text(batch.proof(5).to_json())
    document.write_bytes(documents[5])
    forged.write_bytes(documents[6])

    code, out, _ = await run_cli(str(proof_file), "--document", str(document), "--rpc-url", rpc_url)
    assert code == 0, out
    assert out.splitlines()[-1] == "VALID: the document is in a root anchored on chain 80002"

    code, out, _ = await run_cli(str(proof_file), "--document", str(document))
    assert code == 0, out
    assert "VALID (offline checks only)" in out
    assert "anchor not checked" in out

    code, out, _ = await run_cli(str(proof_file), "--document", str(forged), "--rpc-url", rpc_url)
    assert code == 1
    assert out.splitlines()[-1].startswith("INVALID: document does not match the leaf")

    unanchored = tmp_path / "unanchored.json"
    tree = MerkleTree.build([document_hash(documents[5]), document_hash(b"extra")])
    unanchored.write_text(proof_for_leaf(tree, 0, batch.anchor).to_json())
    code, out, _ = await run_cli(str(unanchored), "--document", str(document))
    assert code == 0  # offline, a tree of one's own making is consistent…
    code, out, _ = await run_cli(str(unanchored), "--rpc-url", rpc_url)
    assert code == 1  # …but the chain never saw its root
    assert "INVALID: root not anchored on chain 80002" in out

    malformed = tmp_path / "malformed.json"
    malformed.write_text(json.dumps(batch.proof(5).to_dict() | {"version": 2}))
    code, out, _ = await run_cli(str(malformed))
    assert code == 1
    assert "INVALID: unsupported proof version 2" in out

    code, _, err = await run_cli(str(proof_file), "--rpc-url", f"http://127.0.0.1:{free_port()}")
    assert code == 2
    assert "unreachable" in err
    code, _, err = await run_cli(str(tmp_path / "missing.json"))
    assert code == 2
    assert "cannot read the proof file" in err
