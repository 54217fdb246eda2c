"""API keys get a name and optional allowlists of origins and client addresses (JSON lists;
null: no limit)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("name", sa.String(100), nullable=True))
        batch.add_column(sa.Column("allowed_origins", sa.Text, nullable=True))
        batch.add_column(sa.Column("allowed_clients", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("allowed_clients")
        batch.drop_column("allowed_origins")
        batch.drop_column("name")
