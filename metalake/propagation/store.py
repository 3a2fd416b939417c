"""Loading a tenant's propagation state from its MongoDB projection (``metalake_<tenant>``).

Read at a tenant's first change and by the dry-run. MongoDB holds every committed row (the changes topic is published
after the upserts), so what is loaded is at least as new as any change that made us look.
"""

from __future__ import annotations

from pymongo.database import Database

from metalake import projection
from metalake.mongo import Doc
from metalake.propagation.graph import Limits
from metalake.propagation.tenant import ASSETS, CLASSIFICATIONS, LINEAGE, PROPAGATED, TenantPropagation

# Propagation's table names -> the projection's collections. Read as open documents (without ``_id``, projected
# away): TenantPropagation.apply reads the fields of a table's key and state by name.
_COLLECTIONS = (
    (LINEAGE, projection.LINEAGE_COLLECTION),
    (CLASSIFICATIONS, projection.CLASSIFICATIONS_COLLECTION),
    (PROPAGATED, projection.PROPAGATED_COLLECTION),
)


def load_tenant(database: Database[Doc], tenant: str, limits: Limits) -> TenantPropagation:
    """The tenant's state: live and deleted lineage edges, classifications and propagated tags (tombstones keep
    versions ordered), and the deleted assets (only those: a live asset needs no row here)."""
    state = TenantPropagation(tenant, limits)
    for table, collection in _COLLECTIONS:
        for doc in database[collection].find({}, {"_id": 0}):
            state.apply(table, doc)
    deleted = database[projection.ASSETS_COLLECTION].find(
        {"deleted": True}, {"_id": 0, "urn": 1, "version": 1, "event_id": 1}
    )
    for doc in deleted:
        state.apply(ASSETS, {**doc, "deleted": True})
    return state
