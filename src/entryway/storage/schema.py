"""The tables, as SQLAlchemy Core: readable SQL, no ORM session state to leak between use
cases. Money, credits and gas are integers (BIGINT); times are UTC."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData(
    naming_convention={
        "pk": "pk_%(table_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ix": "ix_%(table_name)s_%(column_0_name)s",
    }
)

users = Table(
    "users",
    metadata,
    Column("user_id", String(36), primary_key=True),
    Column("email", String(320), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

projects = Table(
    "projects",
    metadata,
    Column("project_id", String(36), primary_key=True),
    Column("owner_id", String(36), ForeignKey("users.user_id"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("plan", String(20), nullable=False),
    Column("aa_module_enabled", Boolean, nullable=False),
    Column("chains", Text, nullable=False),  # comma-separated chain ids
    Column("created_at", DateTime(timezone=True), nullable=False),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("key_id", String(8), primary_key=True),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("environment", String(4), nullable=False),
    Column("digest", String(64), nullable=False),
    Column("chains", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Index("ix_api_keys_project_id", "project_id"),
)

credit_lots = Table(
    "credit_lots",
    metadata,
    Column("lot_id", String(64), primary_key=True),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("amount", BigInteger, nullable=False),
    Column("remaining", BigInteger, nullable=False),
    Column("granted_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Index("ix_credit_lots_project_id", "project_id", "granted_at"),
)

usage_events = Table(
    "usage_events",
    metadata,
    Column("event_id", String(36), primary_key=True),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("idempotency_key", String(200), nullable=False),
    Column("operation", String(40), nullable=False),
    Column("credits", BigInteger, nullable=False),
    Column("overage", BigInteger, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("project_id", "idempotency_key", name="uq_usage_events_idempotency"),
)
