"""Usage events carry a reference (a userOpHash), so an op's credits can be summed."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("usage_events") as batch:
        batch.add_column(sa.Column("reference", sa.String(66), nullable=True))
    op.create_index("ix_usage_events_reference", "usage_events", ["project_id", "reference"])


def downgrade() -> None:
    op.drop_index("ix_usage_events_reference", "usage_events")
    with op.batch_alter_table("usage_events") as batch:
        batch.drop_column("reference")
