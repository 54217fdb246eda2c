"""The API's validation of an intake op (and the block it validated at), so that the chain's
bundler leader may admit a freshly validated op without simulating it again."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("op_intake") as intake:
        intake.add_column(sa.Column("validation", sa.Text, nullable=True))
        intake.add_column(sa.Column("validated_block", sa.BigInteger, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("op_intake") as intake:
        intake.drop_column("validated_block")
        intake.drop_column("validation")
