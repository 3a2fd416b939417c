"""The stack's PostgreSQL for the crawler tests: connections and a throwaway database filled by a script."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from ops.settings import Settings


def connect(settings: Settings, dbname: str) -> psycopg.Connection[Any]:
    return psycopg.connect(
        host="127.0.0.1", port=settings.stack.ports.postgres, user="metalake", dbname=dbname, autocommit=True
    )


@contextmanager
def scratch_database(settings: Settings, populate: str) -> Iterator[str]:
    """A fresh ``it_<hex>`` database with ``populate`` run in it; dropped (connections forced off) after."""
    name = f"it_{secrets.token_hex(4)}"
    with connect(settings, "postgres") as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with connect(settings, name) as conn:
            conn.execute(populate)  # type: ignore[arg-type]  # a test's own literal script
        yield name
    finally:
        with connect(settings, "postgres") as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
