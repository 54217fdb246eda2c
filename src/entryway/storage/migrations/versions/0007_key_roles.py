"""API keys get a role: `service` (uses the service) or `admin` (also administers the project).

Every key that exists when this runs becomes `admin`: before roles, any key could administer
its project, so existing installs keep working exactly as before. Narrow them afterwards:
create `service` keys for apps and revoke the admin keys apps held.

The column keeps no server default once filled: new keys are always inserted with their role,
so a key issued without one fails to insert instead of silently becoming admin.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("role", sa.String(8), nullable=False, server_default="admin"))
    with op.batch_alter_table("api_keys") as batch:
        batch.alter_column("role", existing_type=sa.String(8), server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("role")
