"""`entryway verify`: check a proof file, and tell a person what was and was not proven."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.domain.evm import to_hex
from entryway.domain.proof import InclusionProof, ProofFormatError, VerificationResult
from entryway.errors import EntrywayError
from entryway.notary.verify import block_time_text, verify_proof


class ExitStatus(IntEnum):
    VALID = 0
    INVALID = 1
    NOT_CHECKED = 2  # a file could not be read or the node could not be asked


class ProofInputError(EntrywayError):
    """A file named on the command line could not be read."""


@dataclass(frozen=True, slots=True)
class FileVerification:
    result: VerificationResult
    proof: InclusionProof | None  # None when the file is not a readable proof
    on_chain: bool

    @property
    def status(self) -> ExitStatus:
        return ExitStatus.VALID if self.result.valid else ExitStatus.INVALID


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ProofInputError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None


async def verify_proof_file(
    proof_path: Path, document_path: Path | None = None, rpc_url: str | None = None
) -> FileVerification:
    """Verify a proof file: offline always, on chain when `rpc_url` is given.

    Raises ProofInputError for unreadable files and RPC errors for an unreachable node.
    """
    raw = _read(proof_path, "proof file")
    document = _read(document_path, "document") if document_path is not None else None
    try:
        proof = InclusionProof.from_json(raw)
    except ProofFormatError as exc:
        return FileVerification(VerificationResult(False, str(exc)), None, rpc_url is not None)
    if rpc_url is None:
        return FileVerification(await verify_proof(proof, document_bytes=document), proof, False)
    async with JsonRpcClient(rpc_url) as rpc:
        result = await verify_proof(proof, document_bytes=document, eth=EthClient(rpc))
    return FileVerification(result, proof, True)


def render(outcome: FileVerification, *, document_given: bool) -> list[str]:
    """Lines for a person: each check that passed, the failure, and what is left unproven."""
    result, proof = outcome.result, outcome.proof
    lines = [f"  ok    {check}" for check in result.checks]
    if not result.valid:
        lines.append(f"INVALID: {result.reason}")
        return lines
    if not document_given:
        lines.append("  --    no document given: pass --document to check a file against the leaf")
    if not outcome.on_chain and proof is not None:
        anchor = proof.anchor
        lines.append(
            f"  --    anchor not checked (pass --rpc-url): the proof claims chain "
            f"{anchor.chain_id}, NotaryAnchor {anchor.contract}, transaction "
            f"{to_hex(anchor.transaction_hash)}, block {anchor.block_number} at "
            f"{block_time_text(anchor.block_time)}"
        )
        lines.append(f"VALID (offline checks only): {result.reason}")
        return lines
    lines.append(f"VALID: {result.reason}")
    return lines
