"""The request log: every JSON-RPC and REST call a project makes, with its outcome, latency
and, for UserOperation calls, the sender, nonce and userOpHash."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "request_log",
        sa.Column(
            "entry_id",
            sa.BigInteger().with_variant(sa.Integer, "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("project_id", sa.String(36), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("key_prefix", sa.String(16), nullable=False),
        sa.Column("chain_id", sa.BigInteger, nullable=True),
        sa.Column("method", sa.String(100), nullable=False),
        sa.Column("outcome", sa.String(8), nullable=False),
        sa.Column("http_status", sa.Integer, nullable=False),
        sa.Column("rpc_code", sa.Integer, nullable=True),
        sa.Column("message", sa.Text, nullable=True),
        sa.Column("explanation", sa.Text, nullable=True),
        sa.Column("latency_us", sa.BigInteger, nullable=False),
        sa.Column("sender", sa.String(42), nullable=True),
        sa.Column("nonce", sa.String(66), nullable=True),
        sa.Column("user_op_hash", sa.String(66), nullable=True),
        sa.Column("calls", sa.Integer, nullable=False, server_default="1"),
    )
    op.create_index("ix_request_log_project_id", "request_log", ["project_id", "entry_id"])
    op.create_index("ix_request_log_at", "request_log", ["at"])


def downgrade() -> None:
    op.drop_index("ix_request_log_at", "request_log")
    op.drop_index("ix_request_log_project_id", "request_log")
    op.drop_table("request_log")
