"""Jira through the ``jira`` package (REST v3, ADF bodies): one issue per PII/GDPR-tagged asset, and one per Monte
Carlo incident and affected asset (its fields, the asset's owners and downstream impact; a comment per update; the
resolution comments and transitions it to a done status, as a tag's removal does).

Dedup before creating: a label ``metalake-dedup-<hash of tenant, asset, tag>`` and a JQL search
(``/rest/api/3/search/jql``) for an open issue carrying it. Later changes comment on the issue (the downstream list
from propagation), removal of the tag comments and transitions it to a done status. The key is kept in the ledger
(an anchor the Slack destination links into its thread). An interrupted create is recovered by the same search; an
interrupted comment by a marker in the comment text.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar, cast
from urllib.parse import urlsplit

import requests
from jira import JIRA
from jira.exceptions import JIRAError

from catalog.changes import Change
from control.subscriptions.destinations import DestinationSpec
from control.subscriptions.store import Subscription
from metalake.net.ssrf import AddressGuard, RefusedAddress
from processors.outbound.destinations.common import (
    INCIDENT_KIND,
    Incident,
    incident_anchor,
    incident_of,
    mapping_get,
    worth_telling,
)
from processors.outbound.destinations.jira.messages import (
    jira_comment,
    jira_description,
    jira_incident_comment,
    jira_incident_description,
    jira_incident_summary,
    jira_summary,
)
from processors.outbound.destinations.jira.pinned import guard_session
from processors.outbound.destinations.jira.spec import JiraConfig, JiraSpec
from processors.outbound.runtime.destination import (
    DeliveryResult,
    Destination,
    PermanentDelivery,
    RetryableDelivery,
)
from processors.outbound.runtime.ledger import LedgerScope, Step
from processors.outbound.runtime.retry import parse_retry_after

ANCHOR = "jira-issue"
_KINDS = frozenset({"classification.added", "classification.removed", "propagation.completed"})
_T = TypeVar("_T")


def dedup_label(tenant: str, asset: str, tag: str) -> str:
    digest = hashlib.sha256(f"{tenant}\x1f{asset}\x1f{tag.casefold()}".encode()).hexdigest()
    return f"metalake-dedup-{digest[:16]}"


def incident_label(tenant: str, asset: str, incident_id: str) -> str:
    """The dedup label of an incident's issue on one asset (ids compared as sent: not case-folded like tags)."""
    digest = hashlib.sha256(f"{tenant}\x1f{asset}\x1f#incident\x1f{incident_id}".encode()).hexdigest()
    return f"metalake-dedup-{digest[:16]}"


def _label(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-").lower() or "tag"


class _GuardedJIRA(JIRA):
    """The SDK's client with every connection of its session pinned to a guard-checked address (no DNS rebinding
    between the check and the connect).

    JIRA's constructor asks the server for serverInfo through its session before returning; that request must not
    go out unguarded, so the constructor runs without it, the adapter is mounted, and serverInfo is read the way
    the constructor would have (version and deployment type, which the SDK uses to choose endpoints).
    """

    def __init__(self, *, guard: AddressGuard, **kwargs: Any) -> None:  # noqa: ANN401
        super().__init__(get_server_info=False, validate=False, **kwargs)
        guard_session(self._session, guard)
        info = self.server_info()
        self._version = tuple(info["versionNumbers"])
        self.deploymentType = info.get("deploymentType")

    def drop_connections(self) -> None:
        """Close the session's pooled connections (the session stays usable): a keep-alive connection opened in one
        delivery must not carry into the next, whose deadline (metalake.net.deadline) only covers connections it
        opened."""
        self._session.close()


class JiraDestination(Destination):
    spec: ClassVar[type[DestinationSpec]] = JiraSpec
    order: ClassVar[int] = 10

    def __init__(self, env: Any) -> None:  # noqa: ANN401
        super().__init__(env)
        # Constructing a client costs a serverInfo round trip: keep one per (server, user, token digest).
        self._clients: dict[tuple[str, str, str], _GuardedJIRA] = {}

    def accepts(self, change: Change, subscription: Subscription) -> bool:
        if change.kind == INCIDENT_KIND:
            return JiraConfig.model_validate(subscription.config).incidents and incident_of(change) is not None
        if change.kind not in _KINDS or change.tag is None or change.asset is None or not worth_telling(change):
            return False
        tags = JiraConfig.model_validate(subscription.config).tags
        return change.tag.casefold() in {t.casefold() for t in tags}

    def _client(self, config: JiraConfig, subscription: Subscription) -> _GuardedJIRA:
        token = subscription.secret("api_token")
        if not token:
            raise PermanentDelivery("jira subscription has no api_token")
        server = str(config.server).rstrip("/")
        parts = urlsplit(server)
        try:
            self.env.guard.resolve(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))
        except RefusedAddress as exc:
            raise PermanentDelivery(f"jira server refused: {exc}") from None
        cache_key = (server, config.email, hashlib.sha256(token.encode()).hexdigest())
        client = self._clients.get(cache_key)
        if client is None:
            client = _call(
                lambda: _GuardedJIRA(
                    guard=self.env.guard,
                    server=server,
                    basic_auth=(config.email, token),
                    options={"rest_api_version": "3"},
                    max_retries=0,
                    timeout=self.env.settings.outbound.http_timeout_s,
                )
            )
            self._clients[cache_key] = client
        return client

    def deliver(self, change: Change, subscription: Subscription, ledger: LedgerScope) -> DeliveryResult:
        config: JiraConfig = self.config(subscription)
        client = self._client(config, subscription)
        try:
            return self._deliver(client, config, change, ledger)
        finally:
            client.drop_connections()

    def _deliver(self, client: JIRA, config: JiraConfig, change: Change, ledger: LedgerScope) -> DeliveryResult:
        asset = change.asset or ""
        incident = incident_of(change)
        # The anchor's key and the dedup label: the tag's, or the incident's (a key no tag can have).
        if incident is not None:
            anchor_key, ending = incident_anchor(incident), incident.status == "resolved"
            label = incident_label(change.tenant, asset, incident.incident_id)
        else:
            anchor_key, ending = (change.tag or "").casefold(), change.kind == "classification.removed"
            label = dedup_label(change.tenant, asset, change.tag or "")
        anchor = ledger.anchor(ANCHOR, asset, anchor_key)
        known = str(anchor["key"]) if anchor and anchor.get("open") else None
        server = str(config.server).rstrip("/")
        marker = ledger.key("comment")
        comment = jira_incident_comment(incident, marker) if incident is not None else jira_comment(change, marker)

        if ending:
            found_key = known or _call(lambda: self._search(client, label))
            if found_key is None:
                return DeliveryResult("skipped", "no open jira issue for this")
            key = found_key
            ledger.once("comment", lambda prior: self._comment(client, key, comment, marker, prior))
            ledger.once("transition", lambda prior: self._transition(client, key, prior))
            # The issue is closed: Slack threads stop linking it, and the anchor goes after the retention.
            ledger.set_anchor(
                ANCHOR,
                asset,
                anchor_key,
                {"key": key, "url": f"{server}/browse/{key}", "open": False},
                released=True,
            )
            ledger.unshare(ANCHOR, asset, anchor_key)
            return DeliveryResult("delivered", "jira issue commented and transitioned", {"key": key})

        def ensure(prior: Step | None) -> Mapping[str, str]:
            # Always search before creating: this is the dedup, and it also finds what an interrupted attempt made.
            found = known or _call(lambda: self._search(client, label))
            if found is not None:
                # After an interrupted attempt, an open issue with our label is taken to be the one it created
                # (that attempt searched first too), so it gets no "tag added again" comment.
                recovered = prior is not None and known is None
                return {"key": found, "created": "1" if recovered else ""}
            return {"key": _call(lambda: self._create(client, config, change, incident, label)), "created": "1"}

        issue = ledger.once("issue", ensure)
        key = str(issue["key"])
        link = {"key": key, "url": f"{server}/browse/{key}"}
        ledger.set_anchor(ANCHOR, asset, anchor_key, {**link, "open": True})
        ledger.share(ANCHOR, asset, anchor_key, link)
        if not issue.get("created"):
            ledger.once("comment", lambda prior: self._comment(client, key, comment, marker, prior))
            return DeliveryResult("delivered", "jira issue commented", {"key": key})
        return DeliveryResult("delivered", "jira issue created", {"key": key})

    @staticmethod
    def _search(client: JIRA, label: str) -> str | None:
        result = client.enhanced_search_issues(
            f'labels = "{label}" AND statusCategory != Done ORDER BY created ASC',
            maxResults=1,
            fields=["status"],
            json_result=True,
        )
        issues = cast(dict[str, Any], result).get("issues") or []
        return str(issues[0]["key"]) if issues else None

    def _create(self, client: JIRA, config: JiraConfig, change: Change, incident: Incident | None, label: str) -> str:
        labels = {*(_label(x) for x in config.labels), label}
        if incident is None:
            summary, description = jira_summary(change), jira_description(change)
            labels.add(_label(change.tag or ""))
        else:
            # Read only when the issue is really created: a redelivery or an update costs no catalog reads.
            reader = self.env.catalog
            impact = reader.impact(change.tenant, incident.asset) if reader is not None else None
            catalog = str(config.catalog_url) if config.catalog_url else None
            summary = jira_incident_summary(incident)
            description = jira_incident_description(change, incident, impact, catalog)
            labels.add("monte-carlo-incident")
        fields = {
            "project": {"key": config.project},
            "issuetype": {"name": config.issue_type},
            "summary": summary,
            "labels": sorted(labels),
            "description": description,
        }
        return str(client.create_issue(fields=fields, prefetch=False).key)

    @staticmethod
    def _comment(client: JIRA, key: str, body: Mapping[str, Any], marker: str, prior: Step | None) -> Mapping[str, str]:
        def run() -> Mapping[str, str]:
            if prior is not None:
                for existing in client.comments(key):
                    if marker in json.dumps(getattr(existing, "raw", {}).get("body")):
                        return {"comment": str(existing.id)}
            # REST v3 takes an ADF document where the package's annotation says str; it serialises either.
            comment = client.add_comment(key, cast(str, body))
            return {"comment": str(comment.id)}

        return _call(run)

    @staticmethod
    def _transition(client: JIRA, key: str, prior: Step | None) -> Mapping[str, str]:
        def run() -> Mapping[str, str]:
            if prior is not None:
                issue = client.issue(key, fields="status")
                if mapping_get(issue.raw, "fields", "status", "statusCategory", "key") == "done":
                    return {"transition": "already done"}
            for transition in client.transitions(key):
                if mapping_get(transition, "to", "statusCategory", "key") == "done":
                    client.transition_issue(key, str(transition["id"]))
                    return {"transition": str(transition["id"])}
            return {"transition": "none available"}

        return _call(run)


def _call(action: Callable[[], _T]) -> _T:
    """Run a Jira call, translating its failures into retryable or permanent ones (messages without bodies)."""
    try:
        return action()
    except RefusedAddress as exc:
        # Raised at connect time by the guarded session: the server's name now resolves to a refused address.
        raise PermanentDelivery(f"jira server refused: {exc}") from None
    except JIRAError as exc:
        status = exc.status_code
        if status is None or status == 429 or status >= 500:
            retry_after = None
            if exc.response is not None:
                retry_after = parse_retry_after(exc.response.headers.get("Retry-After"))
            raise RetryableDelivery(f"jira answered {status}", retry_after) from None
        raise PermanentDelivery(f"jira answered {status}") from None
    except (requests.RequestException, OSError) as exc:
        raise RetryableDelivery(f"jira unreachable: {type(exc).__name__}") from None
