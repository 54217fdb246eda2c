"""Support levels that act: each request keeps the support level it was filed under (its
place in the operator's queue and its response target), who answered it, and when it was
first noted overdue (so the overdue alert is logged once)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("support_requests") as requests:
        # Requests filed before levels acted are owed community support.
        requests.add_column(
            sa.Column("support_level", sa.String(40), nullable=False, server_default="community")
        )
        requests.add_column(sa.Column("answered_by", sa.String(320), nullable=True))
        requests.add_column(
            sa.Column("overdue_noted_at", sa.DateTime(timezone=True), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("support_requests") as requests:
        requests.drop_column("overdue_noted_at")
        requests.drop_column("answered_by")
        requests.drop_column("support_level")
