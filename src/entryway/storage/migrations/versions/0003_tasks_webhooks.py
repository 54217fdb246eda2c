"""Durable tasks and webhooks: the task queue, endpoints, events, deliveries and their log."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _when(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _project_id(*, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(
        "project_id", sa.String(36), sa.ForeignKey("projects.project_id"), nullable=nullable
    )


def _count(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.BigInteger, nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("task_id", sa.String(36), primary_key=True),
        sa.Column("kind", sa.String(60), nullable=False),
        _project_id(nullable=True),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        _count("attempts"),
        _count("max_attempts"),
        _when("run_at"),
        sa.Column("lease_owner", sa.String(100), nullable=True),
        _when("lease_expires_at", nullable=True),
        sa.Column("idempotency_key", sa.String(200), nullable=True),
        sa.Column("result", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        _when("created_at"),
        _when("updated_at"),
        _when("finished_at", nullable=True),
        sa.UniqueConstraint("kind", "idempotency_key", name="uq_tasks_idempotency"),
    )
    op.create_index("ix_tasks_ready", "tasks", ["state", "run_at"])
    op.create_index("ix_tasks_project_id", "tasks", ["project_id", "created_at"])
    op.create_table(
        "webhook_endpoints",
        sa.Column("endpoint_id", sa.String(36), primary_key=True),
        _project_id(),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("description", sa.String(200), nullable=False),
        sa.Column("event_types", sa.Text, nullable=False),
        sa.Column("secret", sa.String(100), nullable=False),
        sa.Column("previous_secret", sa.String(100), nullable=True),
        _when("previous_secret_expires_at", nullable=True),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("disabled_reason", sa.String(20), nullable=True),
        _when("disabled_at", nullable=True),
        _count("failure_streak"),
        _when("created_at"),
        _when("updated_at"),
        _when("deleted_at", nullable=True),
    )
    op.create_index("ix_webhook_endpoints_project_id", "webhook_endpoints", ["project_id"])
    op.create_table(
        "webhook_events",
        sa.Column("event_id", sa.String(40), primary_key=True),
        _project_id(),
        sa.Column("event_type", sa.String(60), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=True),
        _when("created_at"),
        sa.UniqueConstraint("project_id", "idempotency_key", name="uq_webhook_events_idempotency"),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("delivery_id", sa.String(36), primary_key=True),
        sa.Column(
            "event_id", sa.String(40), sa.ForeignKey("webhook_events.event_id"), nullable=False
        ),
        sa.Column(
            "endpoint_id",
            sa.String(36),
            sa.ForeignKey("webhook_endpoints.endpoint_id"),
            nullable=False,
        ),
        _project_id(),
        sa.Column("state", sa.String(10), nullable=False),
        _count("attempts"),
        _count("replays"),
        sa.Column("task_id", sa.String(36), nullable=True),
        _when("created_at"),
        _when("updated_at"),
        _when("delivered_at", nullable=True),
        sa.UniqueConstraint("event_id", "endpoint_id", name="uq_webhook_deliveries_event"),
    )
    op.create_index(
        "ix_webhook_deliveries_endpoint_id", "webhook_deliveries", ["endpoint_id", "created_at"]
    )
    op.create_table(
        "webhook_attempts",
        sa.Column("attempt_id", sa.String(36), primary_key=True),
        sa.Column(
            "delivery_id",
            sa.String(36),
            sa.ForeignKey("webhook_deliveries.delivery_id"),
            nullable=False,
        ),
        _count("number"),
        _when("started_at"),
        _when("finished_at", nullable=True),
        _count("duration_ms", nullable=True),
        _count("status_code", nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("outcome", sa.String(12), nullable=False),
    )
    op.create_index(
        "ix_webhook_attempts_delivery_id", "webhook_attempts", ["delivery_id", "number"]
    )


def downgrade() -> None:
    for table in (
        "webhook_attempts",
        "webhook_deliveries",
        "webhook_events",
        "webhook_endpoints",
        "tasks",
    ):
        op.drop_table(table)
