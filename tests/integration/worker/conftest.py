"""The storage tier's `engine` fixture: every test here runs on SQLite and on PostgreSQL."""

from tests.integration.storage.conftest import engine

__all__ = ["engine"]
