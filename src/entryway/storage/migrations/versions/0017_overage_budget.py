"""A project's spending budget: the most overage its owner lets one cycle reach through
sponsorship (credits; None, the default, sets no limit)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.add_column(sa.Column("overage_budget", sa.BigInteger, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.drop_column("overage_budget")
