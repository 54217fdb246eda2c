"""Smart-wallet recoveries run by the service, and their guardians' approvals."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _when(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _text(name: str, length: int | None = None) -> sa.Column[object]:
    kind = sa.Text if length is None else sa.String(length)
    return sa.Column(name, kind, nullable=True)


def upgrade() -> None:
    op.create_table(
        "wallet_recoveries",
        sa.Column("recovery_id", sa.String(36), primary_key=True),
        sa.Column(
            "project_id", sa.String(36), sa.ForeignKey("projects.project_id"), nullable=False
        ),
        sa.Column("key_id", sa.String(8), nullable=True),
        sa.Column("chain_id", sa.BigInteger, nullable=False),
        sa.Column("account", sa.String(42), nullable=False),
        sa.Column("new_owner", sa.String(42), nullable=False),
        sa.Column("recovery_nonce", sa.BigInteger, nullable=False),
        sa.Column("threshold", sa.BigInteger, nullable=False),
        sa.Column("guardians", sa.Text, nullable=False),
        sa.Column("state", sa.String(12), nullable=False),
        _text("start_task_id", 36),
        _text("start_user_op_hash", 66),
        _text("start_submission"),
        _text("start_tx_hash", 66),
        _text("finalize_task_id", 36),
        _text("finalize_user_op_hash", 66),
        _text("finalize_submission"),
        _text("finalize_tx_hash", 66),
        sa.Column("execute_after", sa.BigInteger, nullable=True),
        _text("failure_reason"),
        _when("created_at"),
        _when("updated_at"),
    )
    op.create_index(
        "ix_wallet_recoveries_project_id",
        "wallet_recoveries",
        ["project_id", "chain_id", "account"],
    )
    op.create_table(
        "wallet_recovery_approvals",
        sa.Column(
            "recovery_id",
            sa.String(36),
            sa.ForeignKey("wallet_recoveries.recovery_id"),
            primary_key=True,
        ),
        sa.Column("guardian", sa.String(42), primary_key=True),
        sa.Column("signature", sa.String(132), nullable=False),
        _when("created_at"),
    )


def downgrade() -> None:
    op.drop_table("wallet_recovery_approvals")
    op.drop_index("ix_wallet_recoveries_project_id", table_name="wallet_recoveries")
    op.drop_table("wallet_recoveries")
