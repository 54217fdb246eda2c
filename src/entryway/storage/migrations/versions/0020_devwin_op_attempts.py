"""The intake keeps the sends of each op's bundle (attempts and fee bumps, JSON); the request
log is found by userOpHash (an op refused at send has its page)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("op_intake") as batch:
        batch.add_column(sa.Column("attempts", sa.Text, nullable=True))
    op.create_index("ix_request_log_op", "request_log", ["project_id", "user_op_hash"])


def downgrade() -> None:
    op.drop_index("ix_request_log_op", table_name="request_log")
    with op.batch_alter_table("op_intake") as batch:
        batch.drop_column("attempts")
