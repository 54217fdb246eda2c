"""Billing and metering: cycles and scheduled plan changes on projects, usage event context and
holds, lot draws, request counts, invoices, alerts, sponsorship policies."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _when(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _project_id() -> sa.Column[object]:
    return sa.Column(
        "project_id", sa.String(36), sa.ForeignKey("projects.project_id"), nullable=False
    )


def upgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.add_column(_when("cycle_started_at", nullable=True))
        batch.add_column(
            sa.Column("cycle_overage", sa.BigInteger, nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("next_plan", sa.String(20), nullable=True))
        batch.add_column(sa.Column("low_balance_credits", sa.BigInteger, nullable=True))
    with op.batch_alter_table("usage_events") as batch:
        batch.add_column(sa.Column("key_id", sa.String(8), nullable=True))
        batch.add_column(sa.Column("endpoint", sa.String(100), nullable=True))
        batch.add_column(sa.Column("chain_id", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("subject", sa.String(66), nullable=True))
        batch.add_column(sa.Column("policy_id", sa.String(36), nullable=True))
        batch.add_column(
            sa.Column("status", sa.String(10), nullable=False, server_default="settled")
        )
        batch.add_column(sa.Column("breakdown", sa.Text, nullable=True))
        batch.add_column(_when("settled_at", nullable=True))
    op.create_index("ix_usage_events_project_id", "usage_events", ["project_id", "created_at"])
    op.create_table(
        "usage_draws",
        sa.Column(
            "event_id", sa.String(36), sa.ForeignKey("usage_events.event_id"), primary_key=True
        ),
        sa.Column("lot_id", sa.String(64), sa.ForeignKey("credit_lots.lot_id"), primary_key=True),
        sa.Column("credits", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "request_counts",
        sa.Column(
            "project_id", sa.String(36), sa.ForeignKey("projects.project_id"), primary_key=True
        ),
        sa.Column("key_id", sa.String(8), primary_key=True),
        sa.Column("endpoint", sa.String(100), primary_key=True),
        sa.Column("chain_id", sa.BigInteger, primary_key=True),
        sa.Column("day", sa.String(10), primary_key=True),
        sa.Column("requests", sa.BigInteger, nullable=False),
        sa.Column("credits", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "invoices",
        sa.Column("invoice_id", sa.String(36), primary_key=True),
        _project_id(),
        sa.Column("plan", sa.String(20), nullable=False),
        _when("cycle_start"),
        _when("cycle_end"),
        sa.Column("plan_price_micro_eur", sa.BigInteger, nullable=False),
        sa.Column("overage_credits", sa.BigInteger, nullable=False),
        sa.Column("overage_micro_eur", sa.BigInteger, nullable=False),
        sa.Column("total_micro_eur", sa.BigInteger, nullable=False),
        _when("created_at"),
        sa.UniqueConstraint("project_id", "cycle_start", name="uq_invoices_cycle"),
    )
    op.create_table(
        "alerts",
        sa.Column("alert_id", sa.String(36), primary_key=True),
        _project_id(),
        sa.Column("kind", sa.String(40), nullable=False),
        _when("cycle_start"),
        sa.Column("detail", sa.Text, nullable=False),
        _when("created_at"),
        sa.UniqueConstraint("project_id", "kind", "cycle_start", name="uq_alerts_once_per_cycle"),
    )
    op.create_table(
        "sponsorship_policies",
        sa.Column("policy_id", sa.String(36), primary_key=True),
        _project_id(),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("rules", sa.Text, nullable=False),
        sa.Column("active", sa.Boolean, nullable=False),
        _when("created_at"),
        _when("updated_at", nullable=True),
    )
    op.create_index("ix_sponsorship_policies_project_id", "sponsorship_policies", ["project_id"])


def downgrade() -> None:
    for table in ("sponsorship_policies", "alerts", "invoices", "request_counts", "usage_draws"):
        op.drop_table(table)
    op.drop_index("ix_usage_events_project_id", "usage_events")
    with op.batch_alter_table("usage_events") as batch:
        for column in (
            "key_id", "endpoint", "chain_id", "subject", "policy_id", "status", "breakdown",
            "settled_at",
        ):  # fmt: skip
            batch.drop_column(column)
    with op.batch_alter_table("projects") as batch:
        for column in ("cycle_started_at", "cycle_overage", "next_plan", "low_balance_credits"):
            batch.drop_column(column)
