"""Notarization: anchoring Merkle roots in NotaryAnchor and checking proofs against a chain.

The pure parts (trees, proof documents, offline checks) live in `entryway.domain.merkle`
and `entryway.domain.proof`; this package adds the chain. It holds no database code.
"""
