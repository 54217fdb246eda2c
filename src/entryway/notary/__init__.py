"""Notarization: intake (`service`), sealing batches (`batcher`), anchoring Merkle roots in
NotaryAnchor as durable tasks (`anchor`, `anchoring`) and checking proofs against a chain
(`verify`).

The pure parts (trees, proof documents, offline checks) live in `entryway.domain.merkle`,
`entryway.domain.proof` and `entryway.domain.notarization`; storage in
`entryway.storage.notary`.
"""
