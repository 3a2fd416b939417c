"""The platform's own connection to Trino (``settings.trino.user``): DDL, table registration, catalog listings.

Tenants' queries never use it: they run as the tenant's Trino user (``tenants.naming.trino_user``), which the
generated access rules confine to the tenant's schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from metalake.settings import KernelSettings
from metalake.trino_connect import connect


@contextmanager
def admin_cursor(settings: KernelSettings, *, timeout_s: float = 60.0) -> Iterator[Any]:
    """A cursor on ``settings.trino.catalog`` as the platform user; the connection is closed after the block."""
    conn = connect(settings, request_timeout=timeout_s, source="metalake")
    try:
        yield conn.cursor()
    finally:
        conn.close()
