"""How the platform's processes open MongoDB (FerretDB): the configured URI, a bounded server-selection wait, and
timezone-aware datetimes (the control plane compares stored instants with ``datetime.now(UTC)``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from pymongo import MongoClient
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import ConnectionFailure

from metalake.settings import KernelSettings

# A MongoDB document whose fields nobody fixes: a query filter, an update, a projection, a client's open database.
# Each collection's stored shape is a TypedDict declared next to the store that owns it (see ``typed_collection``).
Doc = dict[str, Any]

D = TypeVar("D", bound=Mapping[str, Any])
T = TypeVar("T")

log = logging.getLogger(__name__)

_MAX_BACKOFF_S = 10.0


def mongo_client(settings: KernelSettings, *, socket_timeout_ms: int | None = None) -> MongoClient[Doc]:
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


def typed_collection(database: Database[Any], name: str, document: type[D]) -> Collection[D]:
    """The collection ``name`` of ``database`` whose documents have the stored shape ``document`` (a TypedDict).

    pymongo types a collection by its client's document class, which is the open ``Doc`` for every client here; a
    TypedDict is a plain dict at run time, so naming the stored shape is a static claim only and changes no codec."""
    del document  # only its type is used
    return cast("Collection[D]", database[name])


def while_unreachable(action: Callable[[], T], wait_s: float, what: str) -> T:
    """``action()``, run again after a growing pause while MongoDB cannot be reached (pymongo's ``ConnectionFailure``:
    no server selected, a connection reset, a network timeout), for at most ``wait_s`` seconds; then its error.

    Only for idempotent writes (version-guarded upserts): a write whose answer was lost may have been applied, and
    runs again. Other errors (a refused write, a bad document) are raised at once."""
    deadline = time.monotonic() + wait_s
    pause = 1.0
    while True:
        try:
            return action()
        except ConnectionFailure as exc:
            if time.monotonic() + pause > deadline:
                raise
            log.warning("mongo.unreachable", extra={"what": what, "retry_in_s": pause, "error": type(exc).__name__})
            time.sleep(pause)
            pause = min(pause * 2, _MAX_BACKOFF_S)
