"""Storage adapters: SQLAlchemy 2 (async) over SQLite by default or PostgreSQL, schema
managed by Alembic migrations shipped in the package."""
