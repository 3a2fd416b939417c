"""The delivery ledger on FerretDB: in flight before the call, done after, what an interrupted attempt leaves, and
anchors per (subscription, asset, tag)."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import MongoClient

from processors.outbound.runtime.ledger import Ledger, Step, idempotency_key
from tenants.naming import CONTROL_DATABASE

pytestmark = pytest.mark.integration


def test_steps_run_once_and_an_interrupted_one_is_handed_to_the_retry(
    mongo: MongoClient[dict[str, Any]], tenant: str
) -> None:
    ledger = Ledger(mongo[CONTROL_DATABASE])
    scope = ledger.scope(tenant, "slack", "change-1")
    assert scope.key("post") == idempotency_key(tenant, "slack", "change-1", "post")
    assert scope.key("post") != ledger.scope(tenant, "slack", "change-2").key("post")

    priors: list[Step | None] = []

    def crash(prior: Step | None) -> dict[str, str]:
        priors.append(prior)
        raise ConnectionError("the process died after the call")

    with pytest.raises(ConnectionError):
        scope.once("post", crash)
    (step,) = ledger.steps_of(tenant, "slack")
    assert (step.state, step.attempts) == ("in_flight", 1)

    def post(prior: Step | None) -> dict[str, str]:
        priors.append(prior)
        return {"ts": "1.2"}

    assert scope.once("post", post) == {"ts": "1.2"}
    assert priors[0] is None and priors[1] is not None and priors[1].state == "in_flight"
    assert scope.once("post", post) == {"ts": "1.2"}  # done: not called again
    assert len(priors) == 2
    (step,) = ledger.steps_of(tenant, "slack")
    assert (step.state, step.attempts, dict(step.result)) == ("done", 3, {"ts": "1.2"})


def test_anchors_are_per_subscription_and_shared_per_tenant(mongo: MongoClient[dict[str, Any]], tenant: str) -> None:
    ledger = Ledger(mongo[CONTROL_DATABASE])
    jira_a = ledger.scope(tenant, "jira-a", "c1")
    jira_a.set_anchor("jira-issue", "urn:a", "pii", {"key": "GOV-1", "open": True})
    jira_a.set_anchor("jira-issue", "urn:a", "pii", {"open": False})
    assert jira_a.anchor("jira-issue", "urn:a", "pii") == {"key": "GOV-1", "open": False}
    jira_a.share("jira-issue", "urn:a", "pii", {"key": "GOV-1"})
    ledger.scope(tenant, "jira-b", "c2").share("jira-issue", "urn:a", "pii", {"key": "OPS-7"})
    slack = ledger.scope(tenant, "slack", "c1")
    assert slack.anchor("jira-issue", "urn:a", "pii") is None
    assert slack.shared("jira-issue", "urn:a", "pii") == [{"key": "GOV-1"}, {"key": "OPS-7"}]
    assert slack.shared("jira-issue", "urn:b", "pii") == []
    assert ledger.scope(f"{tenant}x", "slack", "c1").shared("jira-issue", "urn:a", "pii") == []


def test_an_erase_forgets_the_anchors_naming_the_erased_urn(mongo: MongoClient[dict[str, Any]], tenant: str) -> None:
    import hashlib

    from catalog.changes import Change
    from processors.outbound.runtime.erasure import forget_erased
    from processors.propagation.erasure import erased_event

    table, other = "urn:metalake:postgres:prod/shop/public/customers", "urn:metalake:postgres:prod/shop/public/orders"
    ledger = Ledger(mongo[CONTROL_DATABASE])
    slack, jira = ledger.scope(tenant, "slack", "c1"), ledger.scope(tenant, "jira", "c1")
    slack.set_anchor("slack-thread", f"{table}/email", "pii", {"channel": "C1", "ts": "1.1"})
    jira.set_anchor("jira-issue", table, "pii", {"key": "GOV-1", "open": True})
    jira.share("jira-issue", table, "pii", {"key": "GOV-1"})
    slack.set_anchor("slack-thread", other, "pii", {"channel": "C1", "ts": "1.2"})
    digest = hashlib.sha256(table.encode()).hexdigest()
    change = Change.of(erased_event(tenant, "6f1c2a9e-8d4b-4c1e-9a57-3b2d1e0f4a6c", digest, True))
    assert forget_erased(ledger, change) == 3
    assert (
        slack.anchor("slack-thread", f"{table}/email", "pii") is None and jira.shared("jira-issue", table, "pii") == []
    )
    assert slack.anchor("slack-thread", other, "pii") == {"channel": "C1", "ts": "1.2"}
