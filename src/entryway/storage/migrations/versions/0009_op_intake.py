"""The durable op intake: UserOperations accepted by any API replica, for the chain's elected
bundler leader to bundle, with what became of each."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "op_intake",
        sa.Column("chain_id", sa.BigInteger, primary_key=True),
        sa.Column("user_op_hash", sa.String(66), primary_key=True),
        sa.Column("entry_point", sa.String(42), nullable=False),
        sa.Column("sender", sa.String(42), nullable=False),
        sa.Column("nonce", sa.String(78), nullable=False),
        sa.Column("user_op", sa.Text, nullable=False),
        sa.Column("project_id", sa.String(36), sa.ForeignKey("projects.project_id"), nullable=True),
        sa.Column("state", sa.String(12), nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("tx_hash", sa.String(66), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_op_intake_pending", "op_intake", ["chain_id", "state", "received_at"])


def downgrade() -> None:
    op.drop_index("ix_op_intake_pending", table_name="op_intake")
    op.drop_table("op_intake")
