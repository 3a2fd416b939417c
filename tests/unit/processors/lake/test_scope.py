"""What an erase touches: predicates that hold hashes only, MongoDB filters by _id and URN fields, URN validation."""

from __future__ import annotations

import hashlib
import re

import pytest

from processors.lake.errors import LakeUsageError
from processors.lake.scope import (
    KafkaPosition,
    delta_predicates,
    erase_target,
    identity_predicate,
    mongo_filters,
    raw_pattern,
    urn_fields,
    with_spellings,
)

URN = "urn:metalake:postgres:prod/shop/public/customers"


def _sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def test_delta_predicates_cover_every_table_and_never_spell_the_urn() -> None:
    for children in (False, True):
        predicates = delta_predicates(erase_target("acme", URN, children))
        assert set(predicates) == {
            "events",
            "assets",
            "classifications",
            "lineage_edges",
            "incidents",
            "propagated_tags",
            "asset_edits",
            "_dlq",
        }
        assert not any("customers" in p for p in predicates.values())
    exact = delta_predicates(erase_target("acme", URN))
    assert exact["assets"] == f"sha2(urn, 256) = '{_sha(URN)}'"
    assert "upstream" in exact["lineage_edges"] and "$.upstream" in exact["events"]
    assert f"sha2(raw_key, 256) = '{_sha('acme:' + URN)}'" == exact["_dlq"]


def test_event_urn_fields_come_from_the_schemas() -> None:
    # Edges name their upstream; propagated tags their origin and path; completed propagations what they reached.
    assert urn_fields() == (("origin", "upstream", "urn"), ("added", "path", "removed"))


def test_rows_that_name_the_urn_as_origin_or_path_hop_match() -> None:
    predicates = delta_predicates(erase_target("acme", URN))
    hashed = f"sha2(x, 256) = '{_sha(URN)}'"
    assert predicates["propagated_tags"] == (
        f"sha2(urn, 256) = '{_sha(URN)}' OR sha2(origin, 256) = '{_sha(URN)}' OR exists(path, x -> {hashed})"
    )
    events = predicates["events"]
    assert f"sha2(get_json_object(data, '$.origin'), 256) = '{_sha(URN)}'" in events
    for name in ("path", "added", "removed"):
        assert f"exists(from_json(get_json_object(data, '$.{name}'), 'array<string>'), x -> {hashed})" in events


def test_children_match_the_prefix_with_a_slash_only() -> None:
    assets = delta_predicates(erase_target("acme", URN, include_children=True))["assets"]
    prefix = URN + "/"
    assert f"sha2(substring(urn, 1, {len(prefix)}), 256) = '{_sha(prefix)}'" in assets


def test_mongo_filters_match_ids_and_urn_fields() -> None:
    filters = mongo_filters(erase_target("acme", URN))
    assert filters["assets"] == {"$or": [{"_id": URN}, {"urn": URN}]}
    assert filters["lineage"] == {"$or": [{"urn": URN}, {"upstream": URN}]}
    # An equality on the array field matches a document whose path holds the URN at any hop.
    assert filters["propagated_tags"] == {"$or": [{"urn": URN}, {"origin": URN}, {"path": URN}]}
    with_children = mongo_filters(erase_target("acme", URN, include_children=True))["classifications"]
    assert with_children == {"$or": [{"urn": URN}, {"urn": {"$regex": "^" + URN.replace(".", "\\.") + "/"}}]}


def test_target_hash_is_the_sha256_of_the_urn() -> None:
    target = erase_target("acme", URN)
    assert target.target_hash == _sha(URN) and target.raw_key == f"acme:{URN}"


@pytest.mark.parametrize(
    ("urn", "message"),
    [
        ("customers", "not a metalake URN"),
        ("urn:metalake:postgres:prod/", "1 to 4 non-empty segments"),
    ],
)
def test_invalid_urns_are_refused_with_the_reason(urn: str, message: str) -> None:
    with pytest.raises(LakeUsageError, match=message):
        erase_target("acme", urn)


# Issue 12, item 10: an asset ingested as ".../jane doe's orders" (before URNs were canonicalised) could not be
# erased: the API and the command refused that spelling, and the canonical one matched none of its rows.
ODD = "urn:metalake:postgres:prod/shop/public/jane doe's orders"
CANONICAL = "urn:metalake:postgres:prod/shop/public/jane%20doe%27s%20orders"


def test_any_valid_spelling_names_the_asset_in_canonical_form() -> None:
    assert erase_target("acme", ODD).urn == CANONICAL
    assert erase_target("acme", CANONICAL).urn == CANONICAL
    assert erase_target("acme", ODD).target_hash == _sha(CANONICAL)  # one hash per asset, whatever the spelling


def test_stored_spellings_of_the_urn_are_erased_too_and_lookalikes_are_not() -> None:
    stored = [
        ODD,
        CANONICAL,
        "urn:metalake:postgres:prod/shop/public/jane%20doe's%20orders",  # a third spelling of the same asset
        "urn:metalake:postgres:prod/shop/public/jane doe's orders archive",  # another asset
        "urn:metalake:postgres:prod/shop/public/jane doe's orders/email",  # a child: only with children
        "urn:metalake:postgres:prod/shop/public/jane%20doe%27s%20orders/id",  # a canonical child: by the prefix
        "not a urn",
    ]
    target = with_spellings(erase_target("acme", ODD), stored)
    assert target.urn == CANONICAL
    assert target.spellings == (
        "urn:metalake:postgres:prod/shop/public/jane doe's orders",
        "urn:metalake:postgres:prod/shop/public/jane%20doe's%20orders",
    )
    hashes = ", ".join(repr(_sha(v)) for v in target.values)
    predicates = delta_predicates(target)
    assert predicates["assets"] == f"sha2(urn, 256) IN ({hashes})"
    assert not any("jane" in p for p in predicates.values())  # still hashes only
    assert _sha("acme:" + ODD) in predicates["_dlq"]
    assert mongo_filters(target)["assets"] == {
        "$or": [{"_id": {"$in": list(target.values)}}, {"urn": {"$in": list(target.values)}}]
    }
    assert re.search(raw_pattern(target), f'{{"urn":"{ODD}"}}')
    assert not re.search(raw_pattern(target), f'{{"urn":"{ODD} archive"}}')

    children = with_spellings(erase_target("acme", CANONICAL, include_children=True), stored)
    assert "urn:metalake:postgres:prod/shop/public/jane doe's orders/email" in children.spellings
    assert "urn:metalake:postgres:prod/shop/public/jane%20doe%27s%20orders/id" not in children.spellings


# Dead letters: Spark's rlike is Java regex; the constructs raw_pattern uses (escapes, "?", "[...]", "(?!...)") read
# the same in Python's re, so the pattern's meaning is checked here and on the real stack by the erase test.
LOOKALIKE = URN + "_archive"


@pytest.mark.parametrize(
    ("raw", "exact", "with_children"),
    [
        (f'{{"urn":"{URN}","kind":"table"}}', True, True),
        (URN, True, True),
        (f'{{"urn":"{URN.replace("/", chr(92) + "/")}"}}', True, True),  # JSON may escape the slashes
        (f'{{"urn":"{URN}/email"}}', False, True),  # a child: only when children go too
        (f'{{"urn":"{URN}\\/email"}}', False, True),
        (f'{{"urn":"{LOOKALIKE}"}}', False, False),  # shares the prefix, another name
        (f'{{"urn":"{URN}.v2"}}', False, False),
        ('{"urn":"urn:metalake:postgres:prod/shop/public/orders"}', False, False),
        (b"\xff\xfe not utf-8 " + URN.encode(), True, True),
    ],
)
def test_raw_pattern_finds_the_urn_text_and_not_other_names(raw: str | bytes, exact: bool, with_children: bool) -> None:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    assert bool(re.search(raw_pattern(erase_target("acme", URN)), text)) is exact
    assert bool(re.search(raw_pattern(erase_target("acme", URN, include_children=True)), text)) is with_children


def test_dead_letters_are_deleted_by_kafka_position_which_names_no_urn() -> None:
    rows = [
        KafkaPosition("metalake.events.priority", 1, 9),
        KafkaPosition("metalake.events.priority", 1, 5),
        KafkaPosition("metalake.events.bulk", 0, 7),
    ]
    assert identity_predicate(rows) == (
        "(kafka_topic <=> 'metalake.events.bulk' AND kafka_partition <=> 0 AND kafka_offset IN (7))"
        " OR (kafka_topic <=> 'metalake.events.priority' AND kafka_partition <=> 1 AND kafka_offset IN (5, 9))"
    )
    assert identity_predicate([]) is None
    odd = identity_predicate([KafkaPosition("it's", None, None), KafkaPosition("it's", None, 3)])
    assert (
        odd
        == "(kafka_topic <=> 'it\\'s' AND kafka_partition <=> NULL AND (kafka_offset IN (3) OR kafka_offset IS NULL))"
    )
