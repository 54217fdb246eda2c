"""Dashboard accounts: passwords and sign-in lockout on users, server-side sessions,
project memberships and invitations, operator approvals of paid changes, support requests,
per-project ENTERPRISE terms and maintenance per chain."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users") as users:
        users.add_column(sa.Column("password_hash", sa.String(200), nullable=True))
        users.add_column(
            sa.Column("is_operator", sa.Boolean, nullable=False, server_default=sa.false())
        )
        users.add_column(
            sa.Column("failed_sign_ins", sa.Integer, nullable=False, server_default="0")
        )
        users.add_column(sa.Column("locked_until", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "dashboard_sessions",
        sa.Column("session_digest", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(36), sa.ForeignKey("users.user_id"), nullable=True),
        sa.Column("operator", sa.Boolean, nullable=False),
        sa.Column("csrf_token", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_dashboard_sessions_user_id", "dashboard_sessions", ["user_id"])
    op.create_table(
        "memberships",
        sa.Column(
            "project_id", sa.String(36), sa.ForeignKey("projects.project_id"), primary_key=True
        ),
        sa.Column("user_id", sa.String(36), sa.ForeignKey("users.user_id"), primary_key=True),
        sa.Column("role", sa.String(8), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_memberships_user_id", "memberships", ["user_id"])
    op.execute(
        "INSERT INTO memberships (project_id, user_id, role, created_at) "
        "SELECT project_id, owner_id, 'owner', created_at FROM projects"
    )
    op.create_table(
        "invitations",
        sa.Column("invitation_digest", sa.String(64), primary_key=True),
        sa.Column(
            "project_id", sa.String(36), sa.ForeignKey("projects.project_id"), nullable=False
        ),
        sa.Column("email", sa.String(320), nullable=False),
        sa.Column("role", sa.String(8), nullable=False),
        sa.Column("invited_by", sa.String(36), sa.ForeignKey("users.user_id"), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("accepted_by", sa.String(36), sa.ForeignKey("users.user_id"), nullable=True),
        sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_invitations_project_id", "invitations", ["project_id"])
    op.create_table(
        "approvals",
        sa.Column("approval_id", sa.String(36), primary_key=True),
        sa.Column(
            "project_id", sa.String(36), sa.ForeignKey("projects.project_id"), nullable=False
        ),
        sa.Column("kind", sa.String(16), nullable=False),  # plan_change | credit_pack
        sa.Column("subject", sa.String(40), nullable=False),  # the plan or the pack asked for
        sa.Column("requested_by", sa.String(80), nullable=False),  # "user:<id>" | "key:<id>"
        sa.Column("status", sa.String(10), nullable=False),  # pending | approved | rejected
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_by", sa.String(80), nullable=True),
        sa.Column("note", sa.Text, nullable=True),
    )
    op.create_index("ix_approvals_status", "approvals", ["status", "requested_at"])
    op.create_index("ix_approvals_project_id", "approvals", ["project_id", "requested_at"])
    op.create_table(
        "support_requests",
        sa.Column("request_id", sa.String(36), primary_key=True),
        sa.Column("project_id", sa.String(36), sa.ForeignKey("projects.project_id"), nullable=True),
        sa.Column("user_id", sa.String(36), sa.ForeignKey("users.user_id"), nullable=False),
        sa.Column("topic", sa.String(40), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("details", sa.Text, nullable=True),  # JSON: the topic's own fields
        sa.Column("status", sa.String(10), nullable=False),  # open | answered
        sa.Column("answer", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_support_requests_status", "support_requests", ["status", "created_at"])
    with op.batch_alter_table("projects") as projects:
        projects.add_column(sa.Column("enterprise_monthly_micro_eur", sa.BigInteger, nullable=True))
        projects.add_column(sa.Column("enterprise_monthly_credits", sa.BigInteger, nullable=True))
    op.create_table(
        "chain_maintenance",
        sa.Column("chain_id", sa.BigInteger, primary_key=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("chain_maintenance")
    with op.batch_alter_table("projects") as projects:
        projects.drop_column("enterprise_monthly_credits")
        projects.drop_column("enterprise_monthly_micro_eur")
    op.drop_index("ix_support_requests_status", table_name="support_requests")
    op.drop_table("support_requests")
    op.drop_index("ix_approvals_project_id", table_name="approvals")
    op.drop_index("ix_approvals_status", table_name="approvals")
    op.drop_table("approvals")
    op.drop_index("ix_invitations_project_id", table_name="invitations")
    op.drop_table("invitations")
    op.drop_index("ix_memberships_user_id", table_name="memberships")
    op.drop_table("memberships")
    op.drop_index("ix_dashboard_sessions_user_id", table_name="dashboard_sessions")
    op.drop_table("dashboard_sessions")
    with op.batch_alter_table("users") as users:
        users.drop_column("locked_until")
        users.drop_column("failed_sign_ins")
        users.drop_column("is_operator")
        users.drop_column("password_hash")
