"""The ``io.metalake.asset.erased.v1`` change: a GDPR erase of one asset completed (``metalake lake erase``).

The erase deletes the asset's rows from Delta and MongoDB directly, so no state change tells the propagation processor;
this event does, and the processor then reloads the tenant from MongoDB (already scrubbed) instead of keeping the
erased asset and its edges in memory. It names the asset by its URN's sha256 only: the URN is stored nowhere.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from catalog.changes import changes_key
from metalake.events import CloudEvent, new_event

ERASED_TYPE = "io.metalake.asset.erased.v1"
SOURCE = "/processors/lake/erase"


class _Record(Protocol):
    def headers(self) -> Any: ...  # noqa: ANN401


def erased_event(tenant: str, erasure_id: str, urn_sha256: str, include_children: bool) -> CloudEvent:
    """The event of one completed erase; its id is the erasure id. Keyed by the tenant like every record of
    ``metalake.changes``: it reaches the propagation instance that holds the tenant, after the tenant's earlier
    changes."""
    data = {
        "version": time.time_ns() // 1_000_000,
        "erasure_id": erasure_id,
        "urn_sha256": urn_sha256,
        "include_children": include_children,
    }
    return new_event(ERASED_TYPE, tenant, data, source=SOURCE, event_id=erasure_id, partitionkey=changes_key(tenant))


def erased_tenant(msg: _Record) -> str | None:
    """The tenant of an erased-asset record, None for any other record. Only the headers are read: what the
    processor does (reload the whole tenant) does not depend on which asset went."""
    headers = dict(msg.headers() or ())
    if headers.get("ce_type") != ERASED_TYPE.encode():
        return None
    tenant = headers.get("ce_tenantid")
    return tenant.decode("utf-8", "replace") if isinstance(tenant, bytes) else None
