"""Writing state rows into a tenant's MongoDB projection the way the streaming job does (its guarded upserts), for
API tests that need a catalog without running the job."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

from pymongo.database import Database

from processors.enrichment.projection import apply_upserts, spec_upsert
from processors.enrichment.state import StateSpec

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
# Increasing across the test session, so a later seed of the same key always wins the version guard.
_versions = itertools.count(1)


def seed(db: Database[dict[str, Any]], spec: StateSpec, *, deleted: bool = False, **values: Any) -> None:
    """One row of ``spec`` with ``values`` (other fields null), applied through the job's guarded upsert."""
    row: dict[str, Any] = dict.fromkeys((*spec.key, *spec.fields))
    row.update(values)
    version = next(_versions)
    row.update(deleted=deleted, version=version, event_id=f"e{version:06d}", event_time=NOW, updated_at=NOW)
    applied, _ = apply_upserts(db[spec.collection], [spec_upsert(spec)(row)])
    assert applied == 1
