"""Reorgs: where each settled sponsorship's op was mined (`op_inclusions`), so that a reorg
removing its block reverses the settlement and deep enough blocks make it final; and how
often a notary batch was anchored again after a reorg removed its anchor."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "op_inclusions",
        sa.Column("event_id", sa.String(36), nullable=False),
        sa.Column("project_id", sa.String(36), nullable=False),
        sa.Column("chain_id", sa.BigInteger, nullable=False),
        sa.Column("user_op_hash", sa.String(66), nullable=False),
        sa.Column("hold_key", sa.String(200), nullable=False),
        sa.Column("block_number", sa.BigInteger, nullable=False),
        sa.Column("transaction_hash", sa.String(66), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("final", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("reversal_event_id", sa.String(36), nullable=True),
        sa.ForeignKeyConstraint(
            ["event_id"], ["usage_events.event_id"], name="fk_op_inclusions_event_id"
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.project_id"], name="fk_op_inclusions_project_id"
        ),
        sa.PrimaryKeyConstraint("event_id", name="pk_op_inclusions"),
    )
    op.create_index("ix_op_inclusions_chain_id", "op_inclusions", ["chain_id", "block_number"])
    op.create_index("ix_op_inclusions_project_id", "op_inclusions", ["project_id", "hold_key"])
    with op.batch_alter_table("notary_batches") as batches:
        batches.add_column(sa.Column("reanchors", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("notary_batches") as batches:
        batches.drop_column("reanchors")
    op.drop_index("ix_op_inclusions_project_id", table_name="op_inclusions")
    op.drop_index("ix_op_inclusions_chain_id", table_name="op_inclusions")
    op.drop_table("op_inclusions")
