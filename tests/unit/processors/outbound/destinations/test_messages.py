"""What Slack and Jira are told: text fallback, Block Kit within Slack's limits, metadata, ADF with a capped list."""

from __future__ import annotations

import json

from catalog.changes import PROPAGATION_COMPLETED, STATE_CHANGED, Change
from processors.outbound.destinations.common import worth_telling
from processors.outbound.destinations.jira.messages import jira_comment, jira_description, jira_summary
from processors.outbound.destinations.slack.messages import slack_message

URN = "urn:metalake:postgres:prod/shop/public/customers/email"
DOWN = [f"urn:metalake:postgres:prod/mart/public/t{i}/email" for i in range(60)]


def _added(actor: str | None = "jdoe", source: str = "human") -> Change:
    state = {"source": source, "actor": actor, "confidence": 0.92}
    data = {"table": "classifications", "key": {"urn": URN, "tag": "PII"}, "deleted": False, "state": state}
    return Change("c1", STATE_CHANGED, "acme", data, URN)


def _completed() -> Change:
    data = {"origin": URN, "tag": "PII", "added": DOWN, "removed": [], "reached": 60, "truncated": True}
    return Change("c2", PROPAGATION_COMPLETED, "acme", data, URN)


def test_slack_parent_has_fallback_blocks_and_metadata() -> None:
    msg = slack_message(_added(), "mld_x", [("GOV-1", "https://jira.example/browse/GOV-1")])
    assert msg["text"] == f"PII tag added to {URN}"
    header, section, context, actions = msg["blocks"]
    assert header["type"] == "header" and len(header["text"]["text"]) <= 150
    assert [f["text"].split("\n")[0] for f in section["fields"]] == ["*Asset*", "*Tag*", "*Applied by*"]
    assert "jdoe" in section["fields"][2]["text"]
    assert context["type"] == "context"
    assert actions["elements"][0]["url"] == "https://jira.example/browse/GOV-1"
    assert msg["metadata"] == {
        "event_type": "metalake_classification_added",
        "event_payload": {"tenant": "acme", "asset": URN, "tag": "PII", "change_id": "c1", "dedup_key": "mld_x"},
    }


def test_auto_classification_names_the_classifier() -> None:
    assert "auto-classifier (confidence 0.92)" in json.dumps(slack_message(_added(None, "auto"), "k"))


def test_propagation_reply_counts_and_lists_within_limits() -> None:
    msg = slack_message(_completed(), "k")
    assert msg["text"] == f"PII on {URN} propagated to 60 downstream asset(s) (truncated): +60 added, -0 removed"
    fields = msg["blocks"][1]["fields"]
    assert len(fields) <= 10 and all(len(f["text"]) <= 3000 for f in fields)
    assert fields[-1]["text"].count("•") == 10


def test_jira_adf_and_summary() -> None:
    summary = jira_summary(_added())
    assert summary.startswith("[PII] ") and len(summary) <= 255
    description = jira_description(_completed())
    assert description["type"] == "doc" and description["version"] == 1
    items = description["content"][-1]["content"]
    assert len(items) == 51 and "10 more" in json.dumps(items[-1])
    comment = jira_comment(_completed(), "mld_c")
    assert "[metalake mld_c]" in json.dumps(comment)
    long = Change("c3", STATE_CHANGED, "acme", {"table": "classifications", "key": {"urn": "u" * 400, "tag": "PII"}})
    assert len(jira_summary(long)) == 255


def test_a_propagation_run_that_changed_nothing_is_not_worth_a_message() -> None:
    quiet = Change("c5", PROPAGATION_COMPLETED, "acme", {"origin": URN, "tag": "PII", "added": [], "removed": []})
    assert not worth_telling(quiet) and worth_telling(_completed()) and worth_telling(_added())
