"""Shared by the outbound tests: changes as the enrichment job and propagation publish them, subscriptions, and
settings that let the runtime reach the loopback fake servers."""

from __future__ import annotations

import uuid
from typing import Any

from catalog.changes import PROPAGATION_COMPLETED, Change, StateChange, changes_key
from control.subscriptions.filters import Filters
from control.subscriptions.settings import OutboundSettings
from control.subscriptions.store import Subscription, SubscriptionStore
from metalake.events import CloudEvent, new_event
from ops.settings import Settings

SLACK_TOKEN = "xoxb-test-token"
JIRA_EMAIL, JIRA_TOKEN = "bot@example.com", "jira-token"
WEBHOOK_SECRET = "whsec_" + "c2VjcmV0LXNpZ25pbmcta2V5LWZvci10ZXN0cw=="


def outbound_settings(settings: Settings, **outbound: Any) -> Settings:
    values: dict[str, Any] = {
        "allow_base_url_override": True,
        "ssrf_allow": ["127.0.0.0/8"],
        "backoff_initial_s": 0.05,
        "backoff_max_s": 0.2,
        "retry_initial_s": 0.5,
        "retry_max_s": 2.0,
        "subscriptions_ttl_s": 0.0,
        "http_timeout_s": 5.0,
        **outbound,
    }
    return settings.model_copy(update={"outbound": OutboundSettings(**values)})


def classification_event(tenant: str, urn: str, tag: str, *, deleted: bool = False, version: int = 1) -> CloudEvent:
    """A classifications row's change as the streaming job publishes it."""
    event_id = str(uuid.uuid4())
    return StateChange(
        id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{tenant}|{urn}|{tag}|{version}|{event_id}")),
        source="/processors/enrichment",
        tenant=tenant,
        table="classifications",
        key={"urn": urn, "tag": tag},
        deleted=deleted,
        version=version,
        event_id=event_id,
        state={"source": "human", "propagate": True, "confidence": None, "rule": None, "actor": "jdoe"},
    ).event()


def completed_event(
    tenant: str, origin: str, tag: str, added: list[str], removed: list[str] | None = None
) -> CloudEvent:
    """A propagation run's completed event as the propagation processor publishes it."""
    removed = removed or []
    data = {
        "urn": origin,
        "version": 1,
        "origin": origin,
        "tag": tag,
        "added": added,
        "removed": removed,
        "added_count": len(added),
        "removed_count": len(removed),
        "reached": len(added),
        "max_depth": 2,
        "truncated": False,
        "reason": None,
    }
    # Keyed by tenant as the processor keys it: on the partition of the tenant's other changes, after them.
    return new_event(
        PROPAGATION_COMPLETED, tenant, data, source="/processors/propagation", partitionkey=changes_key(tenant)
    )


def as_change(event: CloudEvent) -> Change:
    return Change.of(event)


def subscribe(
    store: SubscriptionStore,
    tenant: str,
    name: str,
    destination: str,
    config: dict[str, Any],
    secrets: dict[str, str],
    filters: Filters | None = None,
) -> Subscription:
    sub = store.create(tenant, name, destination, config, filters or Filters(), secrets)
    assert sub is not None
    return sub


def slack_sub(
    store: SubscriptionStore, tenant: str, base_url: str, name: str = "slack", **filters: Any
) -> Subscription:
    return subscribe(
        store,
        tenant,
        name,
        "slack",
        {"channel": "C0123", "base_url": base_url},
        {"token": SLACK_TOKEN},
        Filters(**filters),
    )


def jira_sub(store: SubscriptionStore, tenant: str, server: str, name: str = "jira") -> Subscription:
    return subscribe(
        store,
        tenant,
        name,
        "jira",
        {"server": server, "email": JIRA_EMAIL, "project": "GOV"},
        {"api_token": JIRA_TOKEN},
    )


def webhook_sub(store: SubscriptionStore, tenant: str, url: str, name: str = "hook") -> Subscription:
    return subscribe(store, tenant, name, "webhook", {"url": url}, {"key_id": "k1", "secret": WEBHOOK_SECRET})


FRESHDESK_KEY = "fd-api-key-for-tests"


def incident_event(
    tenant: str,
    urn: str,
    incident_id: str,
    status: str,
    *,
    version: int = 1,
    summary: str | None = None,
    url: str | None = None,
) -> CloudEvent:
    """An incidents row's change as the streaming job publishes it (one per incident and affected table)."""
    event_id = str(uuid.uuid4())
    return StateChange(
        id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{tenant}|{urn}|{incident_id}|{version}|{event_id}")),
        source="/processors/enrichment",
        tenant=tenant,
        table="incidents",
        key={"incident_id": incident_id, "urn": urn},
        deleted=False,
        version=version,
        event_id=event_id,
        state={
            "status": status,
            "incident_type": "ANOMALIES",
            "webhook_type": f"{status}_anomaly_incident",
            "feedback": None,
            "severity": "SEV-2",
            "owner": "oncall@example.com",
            "url": url or f"https://getmontecarlo.com/incidents/{incident_id}",
            "summary": summary or "Has 42 rows vs. 101 expected",
        },
    ).event()


def teams_sub(
    store: SubscriptionStore, tenant: str, webhook_url: str, name: str = "teams", **filters: Any
) -> Subscription:
    return subscribe(
        store,
        tenant,
        name,
        "teams",
        {"catalog_url": "https://metalake.example.com"},
        {"webhook_url": webhook_url},
        Filters(**filters),
    )


def freshdesk_sub(store: SubscriptionStore, tenant: str, base_url: str, name: str = "freshdesk") -> Subscription:
    return subscribe(
        store,
        tenant,
        name,
        "freshdesk",
        {"domain": "acme", "base_url": base_url, "email": "governance@example.com"},
        {"api_key": FRESHDESK_KEY},
    )
