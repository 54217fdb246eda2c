"""`column IN (values)` whose SQL does not change with the number of values.

SQLAlchemy writes `IN (...)` with one placeholder per value, so a statement read for three
hashes and the same read for four are two statements: on PostgreSQL each new one is prepared
again (a round trip more, and room taken in each connection's cache of prepared statements).
Hot reads whose lists vary in length (polls read together, a group of accepted ops) send the
list as one array instead: `column = ANY($1)`, one statement for any length. SQLite, with no
arrays, keeps IN."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import ColumnElement, any_, bindparam
from sqlalchemy.dialects.postgresql import ARRAY


def one_of(
    dialect: str, column: ColumnElement[Any], values: Collection[Any]
) -> ColumnElement[bool]:
    """`column` equal to one of `values`, for a database of `dialect` ("postgresql"...)."""
    if dialect == "postgresql":
        return column == any_(bindparam(None, list(values), type_=ARRAY(column.type)))
    return column.in_(values)
