"""Initial schema: users, projects, API keys, credit lots, usage events."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _when(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("user_id", sa.String(36), primary_key=True),
        sa.Column("email", sa.String(320), nullable=False, unique=True),
        _when("created_at"),
    )
    op.create_table(
        "projects",
        sa.Column("project_id", sa.String(36), primary_key=True),
        sa.Column("owner_id", sa.String(36), sa.ForeignKey("users.user_id"), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("plan", sa.String(20), nullable=False),
        sa.Column("aa_module_enabled", sa.Boolean, nullable=False),
        sa.Column("chains", sa.Text, nullable=False),
        _when("created_at"),
    )
    op.create_table(
        "api_keys",
        sa.Column("key_id", sa.String(8), primary_key=True),
        sa.Column(
            "project_id", sa.String(36), sa.ForeignKey("projects.project_id"), nullable=False
        ),
        sa.Column("environment", sa.String(4), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("chains", sa.Text, nullable=False),
        _when("created_at"),
        _when("revoked_at", nullable=True),
    )
    op.create_index("ix_api_keys_project_id", "api_keys", ["project_id"])
    op.create_table(
        "credit_lots",
        sa.Column("lot_id", sa.String(64), primary_key=True),
        sa.Column(
            "project_id", sa.String(36), sa.ForeignKey("projects.project_id"), nullable=False
        ),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("amount", sa.BigInteger, nullable=False),
        sa.Column("remaining", sa.BigInteger, nullable=False),
        _when("granted_at"),
        _when("expires_at"),
    )
    op.create_index("ix_credit_lots_project_id", "credit_lots", ["project_id", "granted_at"])
    op.create_table(
        "usage_events",
        sa.Column("event_id", sa.String(36), primary_key=True),
        sa.Column(
            "project_id", sa.String(36), sa.ForeignKey("projects.project_id"), nullable=False
        ),
        sa.Column("idempotency_key", sa.String(200), nullable=False),
        sa.Column("operation", sa.String(40), nullable=False),
        sa.Column("credits", sa.BigInteger, nullable=False),
        sa.Column("overage", sa.BigInteger, nullable=False),
        _when("created_at"),
        sa.UniqueConstraint("project_id", "idempotency_key", name="uq_usage_events_idempotency"),
    )


def downgrade() -> None:
    for table in ("usage_events", "credit_lots", "api_keys", "projects", "users"):
        op.drop_table(table)
