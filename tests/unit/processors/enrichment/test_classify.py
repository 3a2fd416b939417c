"""Automatic PII classification: the rules, tenant dictionaries, the events, and the human-decision guard."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from processors.enrichment.changes import auto_classifications
from processors.enrichment.classify import DEFAULT_RULES, Match, classify
from processors.enrichment.parse import ParsedRow
from processors.enrichment.projection import spec_upsert
from processors.enrichment.state import CLASSIFICATIONS, fold
from tests._support.parsedrows import valid_row

NOW = datetime(2026, 11, 22, tzinfo=UTC)
COLUMN = "urn:metalake:postgres:prod/shop/public/customers/email"


def test_names_and_types_that_are_personal_data() -> None:
    assert classify("email", "text", DEFAULT_RULES) == [Match("PII", 0.95, "email-name")]
    assert classify("customer_email_address", "varchar(255)", DEFAULT_RULES) == [Match("PII", 0.95, "email-name")]
    assert classify("first_name", "character varying(80)", DEFAULT_RULES) == [Match("PII", 0.85, "person-name")]
    assert classify("card_number", "text", DEFAULT_RULES) == [Match("PCI", 0.9, "payment-card")]
    assert classify("date_of_birth", "date", DEFAULT_RULES) == [Match("PII", 0.9, "birth-date")]


def test_names_that_are_not() -> None:
    for column, data_type in [
        ("id", "bigint"),
        ("emailed_at", "timestamp"),
        ("pipeline", "text"),
        ("first_name_count", "integer"),
        ("zip", "text"),
        ("description", "text"),
    ]:
        assert classify(column, data_type, DEFAULT_RULES) == [], column


def test_a_type_condition_restricts_a_rule() -> None:
    assert classify("last_name", "text", DEFAULT_RULES) != []
    assert classify("last_name", "integer", DEFAULT_RULES) == []


def test_the_tenant_dictionary_adds_its_own_words() -> None:
    assert classify("kundennr", "text", DEFAULT_RULES) == []
    assert classify("kundennr", "text", DEFAULT_RULES, ["KundenNr"]) == [Match("PII", 0.8, "dictionary:kundennr")]
    # A rule that already tagged PII keeps its own (more specific) confidence.
    assert classify("email", "text", DEFAULT_RULES, ["mail"]) == [Match("PII", 0.95, "email-name")]


def _asset(name: str, **row: Any) -> dict[str, Any]:
    base = {
        "urn": f"urn:metalake:postgres:prod/shop/public/customers/{name}",
        "kind": "column",
        "name": name,
        "data_type": "text",
        "deleted": False,
        "version": 42,
    }
    return {**base, **row}


def test_events_only_for_live_columns_with_deterministic_ids() -> None:
    assets = [_asset("email"), _asset("id"), _asset("phone", deleted=True), _asset("customers", kind="table")]
    events = auto_classifications("acme", assets, DEFAULT_RULES, [])
    assert [(e.subject, e.data["tag"], e.data["rule"], e.data["source"], e.data["version"]) for e in events] == [
        (COLUMN, "PII", "email-name", "auto", 42)
    ]
    again = auto_classifications("acme", assets, DEFAULT_RULES, [])
    assert [e.id for e in again] == [e.id for e in events]


def _row(version: int, event_id: str, source: str) -> ParsedRow:
    data = {"urn": COLUMN, "version": version, "tag": "PII", "source": source}
    return valid_row("io.metalake.classification.added.v1", version, event_id, data, NOW)


def test_an_automatic_tag_never_replaces_a_human_decision_in_a_batch() -> None:
    [state] = fold(CLASSIFICATIONS, [_row(1, "a", "human"), _row(99, "b", "auto")], NOW)
    assert (state["source"], state["version"], state["event_id"]) == ("human", 1, "a")


def test_a_human_decision_replaces_an_automatic_tag() -> None:
    [state] = fold(CLASSIFICATIONS, [_row(5, "a", "auto"), _row(6, "b", "human")], NOW)
    assert (state["source"], state["version"]) == ("human", 6)


def test_the_mongodb_upsert_of_an_automatic_tag_skips_human_documents() -> None:
    [auto] = fold(CLASSIFICATIONS, [_row(5, "a", "auto")], NOW)
    assert spec_upsert(CLASSIFICATIONS)(auto)["q"]["source"] == {"$ne": "human"}
    [human] = fold(CLASSIFICATIONS, [_row(5, "a", "human")], NOW)
    assert "source" not in spec_upsert(CLASSIFICATIONS)(human)["q"]


def test_a_removal_folded_after_an_automatic_add_still_applies() -> None:
    removal = _row(3, "c", "human")._replace(event_type="io.metalake.classification.removed.v1")
    [state] = fold(CLASSIFICATIONS, [_row(2, "b", "auto"), removal], NOW)
    assert (state["deleted"], state["version"]) == (True, 3)
    # Not guarded by the human-source filter: the tombstone must reach a document a person wrote.
    assert "source" not in spec_upsert(CLASSIFICATIONS)(state)["q"]
