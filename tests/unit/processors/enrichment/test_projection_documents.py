"""The projection's typed documents (metalake.projection, read by the API) name exactly the fields the streaming job
writes for each state spec (processors.enrichment.state): a field added to a spec must be added to its document."""

from __future__ import annotations

import pytest

from metalake import projection
from processors.enrichment.health import HEALTH_COLUMNS, INSERT_DEFAULTS
from processors.enrichment.state import (
    ASSET_EDITS,
    ASSETS,
    CLASSIFICATIONS,
    INCIDENTS,
    LINEAGE,
    META,
    PROPAGATED,
    StateSpec,
)

DOCUMENTS: list[tuple[StateSpec, type, frozenset[str]]] = [
    (ASSETS, projection.AssetDoc, frozenset(HEALTH_COLUMNS)),
    (CLASSIFICATIONS, projection.ClassificationDoc, frozenset()),
    (LINEAGE, projection.LineageDoc, frozenset()),
    (INCIDENTS, projection.IncidentDoc, frozenset()),
    (PROPAGATED, projection.PropagatedTagDoc, frozenset()),
    (ASSET_EDITS, projection.AssetEditDoc, frozenset()),
]


def _keys(document: type) -> frozenset[str]:
    return frozenset(document.__required_keys__ | document.__optional_keys__)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("spec", "document", "extra"), DOCUMENTS, ids=lambda v: getattr(v, "collection", ""))
def test_a_document_has_the_fields_of_its_spec(spec: StateSpec, document: type, extra: frozenset[str]) -> None:
    assert _keys(document) == {"_id", *spec.columns, *extra}


@pytest.mark.parametrize(("spec", "document", "extra"), DOCUMENTS, ids=lambda v: getattr(v, "collection", ""))
def test_what_a_tombstone_keeps_is_required(spec: StateSpec, document: type, extra: frozenset[str]) -> None:
    # A removal writes the key and the meta fields only (spec_upsert); an asset also gets its insert defaults.
    inserted = frozenset(INSERT_DEFAULTS) if spec is ASSETS else frozenset()
    assert document.__required_keys__ == {"_id", *spec.key, *META, *inserted}  # type: ignore[attr-defined]


def test_the_specs_write_the_collections_the_readers_name() -> None:
    assert [spec.collection for spec, _, _ in DOCUMENTS] == [
        projection.ASSETS_COLLECTION,
        projection.CLASSIFICATIONS_COLLECTION,
        projection.LINEAGE_COLLECTION,
        projection.INCIDENTS_COLLECTION,
        projection.PROPAGATED_COLLECTION,
        projection.ASSET_EDITS_COLLECTION,
    ]
