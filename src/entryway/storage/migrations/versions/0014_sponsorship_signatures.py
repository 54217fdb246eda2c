"""Sponsorship signatures: each paymaster signature returned, with the project and hold it
draws on, so that the chain's UserOperationEvents naming our paymaster are charged whoever
submitted the op; and how far each chain's paymaster events have been read."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sponsorship_signatures",
        sa.Column("signature_id", sa.String(36), nullable=False),
        sa.Column("chain_id", sa.BigInteger, nullable=False),
        sa.Column("entry_point", sa.String(42), nullable=False),
        sa.Column("user_op_hash", sa.String(66), nullable=True),
        sa.Column("sender", sa.String(42), nullable=False),
        sa.Column("nonce", sa.String(78), nullable=False),
        sa.Column("project_id", sa.String(36), nullable=False),
        sa.Column("hold_key", sa.String(200), nullable=False),
        sa.Column("user_op", sa.Text, nullable=False),
        sa.Column("valid_until", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("block_number", sa.BigInteger, nullable=True),
        sa.Column("transaction_hash", sa.String(66), nullable=True),
        sa.Column("submitted_by", sa.String(12), nullable=True),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.project_id"], name="fk_sponsorship_signatures_project_id"
        ),
        sa.PrimaryKeyConstraint("signature_id", name="pk_sponsorship_signatures"),
        sa.UniqueConstraint("chain_id", "user_op_hash", name="uq_sponsorship_signatures_hash"),
    )
    op.create_index(
        "ix_sponsorship_signatures_sender",
        "sponsorship_signatures",
        ["chain_id", "sender", "nonce"],
    )
    op.create_index(
        "ix_sponsorship_signatures_hold", "sponsorship_signatures", ["project_id", "hold_key"]
    )
    op.create_table(
        "paymaster_event_cursors",
        sa.Column("chain_id", sa.BigInteger, nullable=False),
        sa.Column("next_block", sa.BigInteger, nullable=False),
        sa.Column("final_block", sa.BigInteger, nullable=False),
        sa.Column("final_time", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("chain_id", name="pk_paymaster_event_cursors"),
    )


def downgrade() -> None:
    op.drop_table("paymaster_event_cursors")
    op.drop_index("ix_sponsorship_signatures_hold", "sponsorship_signatures")
    op.drop_index("ix_sponsorship_signatures_sender", "sponsorship_signatures")
    op.drop_table("sponsorship_signatures")
