"""The projection's typed documents (catalog.projection, read by the API) name exactly the fields the streaming job
writes for each state spec (processors.enrichment.state): a field added to a spec must be added to its document."""

from __future__ import annotations

import pytest

from catalog import projection
from processors.enrichment.health import HEALTH_COLUMNS, INSERT_DEFAULTS
from processors.enrichment.projection import spec_upsert
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
    (CLASSIFICATIONS, projection.ClassificationDoc, frozenset({"urn_keys"})),
    (LINEAGE, projection.LineageDoc, frozenset()),
    (INCIDENTS, projection.IncidentDoc, frozenset()),
    (PROPAGATED, projection.PropagatedTagDoc, frozenset({"urn_keys"})),
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


@pytest.mark.parametrize("deleted", [False, True])
def test_tag_documents_are_written_with_their_normalised_urn_keys(deleted: bool) -> None:
    # The OPA decisions look a table's tags up by them (catalog.urn_keys), tombstones included: a key field.
    urn = "urn:metalake:postgres:Shop/Shop/Public/People/Email"
    for spec in (CLASSIFICATIONS, PROPAGATED, ASSETS):
        row = {**dict.fromkeys(spec.columns), "urn": urn, "tag": "PII", "origin": "o", "version": 1, "event_id": "e"}
        row["deleted"] = deleted
        written = spec_upsert(spec)(row)["u"]["$set"]
        if spec is ASSETS:
            assert "urn_keys" not in written
        else:
            assert written["urn_keys"] == [
                "urn:metalake:postgres:shop/shop/public/people/email",
                "urn:metalake:postgres:shop/shop/public/people",
            ]
