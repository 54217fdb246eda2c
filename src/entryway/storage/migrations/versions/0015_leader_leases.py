"""Bundler leader leases: the election of a chain's bundler leader on SQLite (PostgreSQL
elects with an advisory lock and leaves the table empty)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leader_leases",
        sa.Column("lease_key", sa.String(24), nullable=False),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("lease_key", name="pk_leader_leases"),
    )


def downgrade() -> None:
    op.drop_table("leader_leases")
