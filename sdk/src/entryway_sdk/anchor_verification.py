"""Checking a proof's anchor on chain, through any JSON-RPC node of the proof's chain: the
node serves `chainId`; NotaryAnchor at `contract` records the root with the proof's block
time, block and leaf count (`anchorOf(root)`, whose time is what `anchoredAt(root)`
returns); and the proof's transaction emitted `Anchored` for the root.

A proof that fails a check gives an invalid result; a node that cannot be reached raises
NetworkConnectionError, as the answer is then unknown rather than no."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import httpx
from eth_abi.exceptions import DecodingError

from entryway_sdk import abi
from entryway_sdk._hex import hex_bytes, quantity
from entryway_sdk.errors import JsonRpcError
from entryway_sdk.proof import (
    Proof,
    ProofFailure,
    ProofLike,
    VerificationResult,
    verify_proof,
)
from entryway_sdk.transport import NodeRpc, RetryPolicy


def block_time_text(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def verify_proof_on_chain(
    proof: ProofLike,
    rpc_url: str,
    *,
    document: bytes | None = None,
    check_transaction: bool = True,
    http: httpx.AsyncClient | None = None,
    retry: RetryPolicy | None = None,
) -> VerificationResult:
    """Every check: offline (form, `document` if given, path), then the anchor through the
    node at `rpc_url`. `check_transaction=False` skips the transaction's receipt (one call
    fewer; the contract's record is the proof). `http`, if given, is used and left open."""
    session = http if http is not None else httpx.AsyncClient(timeout=30.0)
    try:
        node = NodeRpc(session, rpc_url, retry or RetryPolicy())
        return await verify_with_node(
            proof, node, document=document, check_transaction=check_transaction
        )
    finally:
        if http is None:
            await session.aclose()


async def verify_with_node(
    proof: ProofLike,
    node: NodeRpc,
    *,
    document: bytes | None = None,
    check_transaction: bool = True,
) -> VerificationResult:
    """`verify_proof_on_chain` through a node the caller already holds."""
    offline = verify_proof(proof, document)
    if not offline.valid or offline.proof is None:
        return offline
    parsed = offline.proof
    checks = list(offline.checks)

    def fail(reason: str, failure: ProofFailure) -> VerificationResult:
        return VerificationResult(False, reason, failure, tuple(checks), True, parsed)

    rpc_chain = await node.chain_id()
    if rpc_chain != parsed.chain_id:
        return fail(
            f"root is for chain {parsed.chain_id}, RPC is chain {rpc_chain}",
            ProofFailure.OTHER_CHAIN,
        )
    checks.append(f"RPC serves chain {rpc_chain}")
    if not await node.get_code(parsed.contract):
        return fail(
            f"no contract at {parsed.contract} on chain {rpc_chain}", ProofFailure.NO_CONTRACT
        )
    notary = abi.load("NotaryAnchor")
    root = hex_bytes(parsed.root)
    try:
        raw = await node.call(parsed.contract, notary.encode_call("anchorOf", root))
        ((timestamp, block_number, leaf_count),) = notary.decode_output("anchorOf", raw)
    except (JsonRpcError, DecodingError) as exc:
        return fail(f"{parsed.contract} is not a NotaryAnchor: {exc}", ProofFailure.NO_CONTRACT)
    if timestamp == 0:
        return fail(
            f"root not anchored on chain {rpc_chain} (NotaryAnchor {parsed.contract})",
            ProofFailure.NOT_ANCHORED,
        )
    for what, actual, claimed in (
        ("at block time", timestamp, parsed.block_time),
        ("in block", block_number, parsed.block_number),
        ("with leaf count", leaf_count, parsed.leaf_count),
    ):
        if actual != claimed:
            return fail(
                f"root was anchored {what} {actual}, the proof says {claimed}",
                ProofFailure.ANCHOR_MISMATCH,
            )
    checks.append(
        f"NotaryAnchor {parsed.contract} anchored the root in block {parsed.block_number} at "
        f"{block_time_text(parsed.block_time)} ({leaf_count} leaves)"
    )
    if check_transaction:
        why = await _transaction_failure(parsed, node)
        if why is not None:
            return fail(why, ProofFailure.TRANSACTION_MISMATCH)
        checks.append(f"transaction {parsed.transaction_hash} emitted Anchored({parsed.root})")
    subject = "the leaf" if document is None else "the document"
    return VerificationResult(
        True,
        f"{subject} is in a root anchored on chain {rpc_chain} at "
        f"{block_time_text(parsed.block_time)}",
        None,
        tuple(checks),
        True,
        parsed,
    )


async def _transaction_failure(proof: Proof, node: NodeRpc) -> str | None:
    """Why the proof's transaction does not record its anchor, or None when it does."""
    tx = proof.transaction_hash
    receipt = await node.get_transaction_receipt(tx)
    if receipt is None:
        return f"transaction {tx} not found on chain {proof.chain_id}"
    block = quantity(receipt.get("blockNumber") or 0, "blockNumber")
    if block != proof.block_number:
        return f"transaction {tx} is in block {block}, the proof says {proof.block_number}"
    if quantity(receipt.get("status") or 0, "status") != 1:
        return f"transaction {tx} reverted"
    event = _anchored_event(receipt.get("logs") or [], proof)
    if event is None:
        return f"transaction {tx} emitted no Anchored event for the root"
    if event["timestamp"] != proof.block_time or event["leafCount"] != proof.leaf_count:
        return (
            f"transaction {tx} anchored the root at {event['timestamp']} with "
            f"{event['leafCount']} leaves, the proof says {proof.block_time} and "
            f"{proof.leaf_count}"
        )
    return None


def _anchored_event(logs: list[Any], proof: Proof) -> dict[str, Any] | None:
    """The decoded `Anchored(root, …)` log that the proof's contract emitted, if any."""
    notary = abi.load("NotaryAnchor")
    wanted = ["0x" + notary.event_topic("Anchored").hex(), proof.root]
    for log in logs:
        if not isinstance(log, Mapping):
            continue
        address = str(log.get("address", "")).lower()
        topics = [str(t).lower() for t in log.get("topics") or []]
        if address != proof.contract.lower() or topics[:2] != wanted:
            continue
        try:
            return notary.decode_event_data("Anchored", hex_bytes(log.get("data") or "0x"))
        except (DecodingError, ValueError):
            return None
    return None
