"""Alembic environment: migrations run on the connection the caller hands over."""

from __future__ import annotations

from alembic import context

from entryway.storage.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through entryway.storage.engine.migrate")
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
