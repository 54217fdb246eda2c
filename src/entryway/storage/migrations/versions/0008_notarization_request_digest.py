"""Notarizations carry the digest of the request that wrote them, so that an idempotency key
sent again with another request (another endpoint, other items) is told apart from a retry.

Rows written before keep no digest (NULL). Their idempotency keys were spelled differently
(endpoint and item count before the client's key), so no request from now on names them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("notarizations") as batch:
        batch.add_column(sa.Column("request_digest", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("notarizations") as batch:
        batch.drop_column("request_digest")
