"""Notarization: submitted hashes and documents, the batches whose roots are anchored, and
the documents a project asked the service to keep."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _when(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _count(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.BigInteger, nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "notary_batches",
        sa.Column("batch_id", sa.String(36), primary_key=True),
        _count("chain_id"),
        sa.Column("mode", sa.String(10), nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        _count("leaf_count"),
        sa.Column("root", sa.String(66), nullable=True),
        sa.Column("contract", sa.String(42), nullable=True),
        sa.Column("transaction_hash", sa.String(66), nullable=True),
        _count("block_number", nullable=True),
        _count("block_time", nullable=True),
        sa.Column("task_id", sa.String(36), nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        _when("created_at"),
        _when("anchored_at", nullable=True),
    )
    op.create_index("ix_notary_batches_chain_id", "notary_batches", ["chain_id", "state"])
    op.create_table(
        "notarizations",
        sa.Column("notarization_id", sa.String(36), primary_key=True),
        sa.Column(
            "project_id", sa.String(36), sa.ForeignKey("projects.project_id"), nullable=False
        ),
        sa.Column("key_id", sa.String(8), nullable=True),
        _count("chain_id"),
        sa.Column("mode", sa.String(10), nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("document_hash", sa.String(66), nullable=False),
        _count("data_bytes"),
        sa.Column("label", sa.String(200), nullable=True),
        sa.Column("metadata_json", sa.Text, nullable=True),
        sa.Column("filename", sa.String(255), nullable=True),
        sa.Column("content_type", sa.String(200), nullable=True),
        sa.Column("stored", sa.Boolean, nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=True),
        sa.Column(
            "batch_id", sa.String(36), sa.ForeignKey("notary_batches.batch_id"), nullable=True
        ),
        _count("leaf_index", nullable=True),
        _when("created_at"),
        sa.UniqueConstraint("project_id", "idempotency_key", name="uq_notarizations_idempotency"),
    )
    op.create_index("ix_notarizations_project_id", "notarizations", ["project_id", "created_at"])
    op.create_index(
        "ix_notarizations_batch_id", "notarizations", ["batch_id", "chain_id", "created_at"]
    )
    op.create_table(
        "notary_documents",
        sa.Column(
            "notarization_id",
            sa.String(36),
            sa.ForeignKey("notarizations.notarization_id"),
            primary_key=True,
        ),
        sa.Column("content", sa.LargeBinary, nullable=False),
        _when("created_at"),
    )


def downgrade() -> None:
    for table in ("notary_documents", "notarizations", "notary_batches"):
        op.drop_table(table)
