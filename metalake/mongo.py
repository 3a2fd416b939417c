"""How the platform's processes open MongoDB (FerretDB): the configured URI, a bounded server-selection wait, and
timezone-aware datetimes (the control plane compares stored instants with ``datetime.now(UTC)``)."""

from __future__ import annotations

from typing import Any

from pymongo import MongoClient

from metalake.settings import Settings

# A MongoDB document as the control-plane stores and the projections read and write it (pymongo's own default).
Doc = dict[str, Any]


def mongo_client(settings: Settings, *, socket_timeout_ms: int | None = None) -> MongoClient[Doc]:
    """A client for ``settings.mongo_uri``; pymongo connects lazily, so this does no I/O.

    ``socket_timeout_ms`` bounds each operation's wait for the server's answer (pymongo's default: none). Only a
    loop that must not stall on one unanswered operation sets it (the access runner); a bounded wait would fail the
    long scans of the lake jobs and the projection."""
    # Passed only when set: an explicit None would override a socketTimeoutMS the URI carries.
    options: dict[str, Any] = {} if socket_timeout_ms is None else {"socketTimeoutMS": socket_timeout_ms}
    return MongoClient(
        settings.mongo_uri,
        serverSelectionTimeoutMS=settings.mongo.server_selection_timeout_ms,
        tz_aware=True,
        **options,
    )
