"""How the platform's processes open MongoDB (FerretDB): the configured URI, a bounded server-selection wait, and
timezone-aware datetimes (the control plane compares stored instants with ``datetime.now(UTC)``)."""

from __future__ import annotations

from typing import Any

from pymongo import MongoClient

from metalake.settings import Settings


def mongo_client(settings: Settings) -> MongoClient[dict[str, Any]]:
    """A client for ``settings.mongo_uri``; pymongo connects lazily, so this does no I/O."""
    return MongoClient(
        settings.mongo_uri, serverSelectionTimeoutMS=settings.mongo.server_selection_timeout_ms, tz_aware=True
    )
