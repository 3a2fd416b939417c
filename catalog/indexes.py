"""The indexes of a tenant's MongoDB projection that the admin API's reads need (its listings' keyset paging, name
prefix search, the tag lookups of OPA decisions by ``urn_keys``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pymongo import ASCENDING, IndexModel

from catalog import projection, urn_keys

# Indexes the admin API's reads (api.services.catalog) are shaped for; provisioning creates them (the lake worker's
# MongoDB step, control.provisioning.steps), one by one and only the missing ones.
INDEXES: Mapping[str, Sequence[IndexModel]] = {
    projection.ASSETS_COLLECTION: (IndexModel([("name", ASCENDING), ("_id", ASCENDING)], name="name_id"),),
    # urn_keys: the OPA decisions' exact lookups of a table's tags (catalog.urn_keys).
    projection.CLASSIFICATIONS_COLLECTION: (
        IndexModel([("tag", ASCENDING), ("urn", ASCENDING)], name="tag_urn"),
        IndexModel([(urn_keys.FIELD, ASCENDING)], name="urn_keys"),
    ),
    projection.PROPAGATED_COLLECTION: (
        IndexModel([("tag", ASCENDING), ("urn", ASCENDING)], name="tag_urn"),
        IndexModel([(urn_keys.FIELD, ASCENDING)], name="urn_keys"),
    ),
    projection.LINEAGE_COLLECTION: (
        IndexModel([("upstream", ASCENDING)], name="upstream"),
        IndexModel([("urn", ASCENDING)], name="urn"),
    ),
    projection.INCIDENTS_COLLECTION: (IndexModel([("urn", ASCENDING), ("_id", ASCENDING)], name="urn_id"),),
    projection.ASSET_EDITS_COLLECTION: (IndexModel([("urn", ASCENDING), ("_id", ASCENDING)], name="urn_id"),),
}
