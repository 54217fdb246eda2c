"""Checking a proof of inclusion against the chain its root was anchored on.

Offline checks (form, document, path) are `entryway.domain.proof.verify_offline`; this adds:
the RPC serves the proof's chain, NotaryAnchor holds the root with the proof's block time,
block and leaf count, and the proof's transaction emitted the `Anchored` event for it.
Node failures (unreachable, malformed answers) raise; a proof that fails a check returns a
result with `valid=False` and the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from entryway.chain.rpc import EthClient
from entryway.domain.evm import to_hex
from entryway.domain.proof import InclusionProof, VerificationResult, verify_offline
from entryway.notary.contract import NotaryReadError, anchor_of, anchored_event


def block_time_text(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def verify_on_chain(
    proof: InclusionProof, eth: EthClient, *, check_transaction: bool = True
) -> VerificationResult:
    """Check the proof's anchor on the chain `eth` serves (not the path: see verify_proof)."""
    record, root = proof.anchor, to_hex(proof.root)
    checks: list[str] = []

    def fail(reason: str) -> VerificationResult:
        return VerificationResult(False, reason, tuple(checks))

    rpc_chain = await eth.chain_id()
    if rpc_chain != record.chain_id:
        return fail(f"root is for chain {record.chain_id}, RPC is chain {rpc_chain}")
    checks.append(f"RPC serves chain {rpc_chain}")
    if not await eth.get_code(record.contract):
        return fail(f"no contract at {record.contract} on chain {rpc_chain}")
    try:
        on_chain = await anchor_of(eth, record.contract, proof.root)
    except NotaryReadError as exc:
        return fail(f"{record.contract} is not a NotaryAnchor: {exc}")
    if not on_chain.anchored:
        return fail(f"root not anchored on chain {rpc_chain} (NotaryAnchor {record.contract})")
    for what, actual, claimed in (
        ("at block time", on_chain.timestamp, record.block_time),
        ("in block", on_chain.block_number, record.block_number),
        ("with leaf count", on_chain.leaf_count, proof.leaf_count),
    ):
        if actual != claimed:
            return fail(f"root was anchored {what} {actual}, the proof says {claimed}")
    checks.append(
        f"NotaryAnchor {record.contract} anchored the root in block {record.block_number} "
        f"at {block_time_text(record.block_time)} ({on_chain.leaf_count} leaves)"
    )
    if check_transaction:
        failure = await _check_transaction(proof, eth)
        if failure is not None:
            return fail(failure)
        checks.append(f"transaction {to_hex(record.transaction_hash)} emitted Anchored({root})")
    return VerificationResult(True, f"root anchored on chain {rpc_chain}", tuple(checks))


async def _check_transaction(proof: InclusionProof, eth: EthClient) -> str | None:
    """Why the proof's transaction does not record its anchor, or None when it does."""
    record, tx_hash = proof.anchor, to_hex(proof.anchor.transaction_hash)
    receipt = await eth.get_receipt(tx_hash)
    if receipt is None:
        return f"transaction {tx_hash} not found on chain {record.chain_id}"
    if receipt.block_number != record.block_number:
        return (
            f"transaction {tx_hash} is in block {receipt.block_number}, "
            f"the proof says {record.block_number}"
        )
    if anchored_event(receipt.logs, record.contract, proof.root) is None:
        return f"transaction {tx_hash} emitted no Anchored event for the root"
    return None


async def verify_proof(
    proof: InclusionProof | Mapping[str, Any],
    *,
    document_bytes: bytes | None = None,
    eth: EthClient | None = None,
    check_transaction: bool = True,
) -> VerificationResult:
    """Every check there is: offline (form, document if given, path), then on chain if `eth`.

    Without `eth` a valid result covers only the offline checks.
    """
    offline = verify_offline(proof, document_bytes)
    if not offline.valid or eth is None:
        return offline
    parsed = proof if isinstance(proof, InclusionProof) else InclusionProof.from_dict(proof)
    on_chain = await verify_on_chain(parsed, eth, check_transaction=check_transaction)
    checks = offline.checks + on_chain.checks
    if not on_chain.valid:
        return VerificationResult(False, on_chain.reason, checks)
    subject = "the leaf" if document_bytes is None else "the document"
    reason = f"{subject} is in a root anchored on chain {parsed.anchor.chain_id}"
    return VerificationResult(True, reason, checks)
