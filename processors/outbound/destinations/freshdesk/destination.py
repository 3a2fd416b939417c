"""Freshdesk through its REST API v2: one open ticket per (asset, tag) of the configured tags, and one per Monte
Carlo incident and affected asset; a private note for what follows; a status change when it ends.

Requests go through the SSRF guard and the pinned connection webhooks use (the domain is tenant-chosen), with basic
auth (the API key as user, ``X`` as password). Dedup: the ticket id is kept in the ledger as an anchor per
(subscription, asset, tag or incident), which survives restarts; before creating, and whenever the ledger has no
open ticket (a second subscription, a create whose answer was lost), the ticket is looked for by its dedup tag
``metalake-<hash of tenant, asset, key>`` with the search API, open or pending tickets only. Notes carry a marker an
interrupted attempt looks for among the ticket's conversations. 429 (with Retry-After) and 5xx are retried.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import quote

from catalog.changes import Change
from control.subscriptions.destinations import DestinationSpec
from control.subscriptions.store import Subscription
from metalake.net.ssrf import RefusedAddress
from processors.outbound.destinations.common import INCIDENT_KIND, Incident, incident_of, worth_telling
from processors.outbound.destinations.freshdesk.messages import (
    incident_description,
    incident_subject,
    note,
    tag_description,
    tag_subject,
)
from processors.outbound.destinations.freshdesk.spec import FreshdeskConfig, FreshdeskSpec
from processors.outbound.runtime.destination import (
    DeliveryResult,
    Destination,
    PermanentDelivery,
    RetryableDelivery,
)
from processors.outbound.runtime.ledger import LedgerScope, Step
from processors.outbound.runtime.pinned_http import request
from processors.outbound.runtime.retry import parse_retry_after

ANCHOR = "freshdesk-ticket"
OPEN, PENDING = 2, 3
_TAG_KINDS = frozenset({"classification.added", "classification.removed", "propagation.completed"})
_RETRYABLE = frozenset({408, 425, 429, 500, 502, 503, 504})
# Search results and conversation lists are the largest answers read (30 entries a page).
_MAX_ANSWER_BYTES = 4 * 1024 * 1024


def dedup_tag(tenant: str, asset: str, key: str) -> str:
    """The ticket tag one (tenant, asset, tag or incident) is found by (Freshdesk tags are at most 32 characters)."""
    digest = hashlib.sha256(f"{tenant}\x1f{asset}\x1f{key}".encode()).hexdigest()
    return f"metalake-{digest[:16]}"


class _Api:
    """The calls of one delivery: base URL, auth header and the guard."""

    def __init__(self, destination: FreshdeskDestination, base: str, api_key: str) -> None:
        self._env = destination.env
        self.base = base.rstrip("/")
        self._auth = "Basic " + base64.b64encode(f"{api_key}:X".encode()).decode()

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:  # noqa: ANN401
        headers = {"Authorization": self._auth, "Accept": "application/json", "User-Agent": "metalake-outbound/1"}
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
            headers["Content-Type"] = "application/json"
        try:
            answer = request(
                method,
                self.base + path,
                data,
                headers,
                guard=self._env.guard,
                timeout_s=self._env.settings.outbound.http_timeout_s,
                max_body_bytes=_MAX_ANSWER_BYTES,
            )
        except RefusedAddress as exc:
            raise PermanentDelivery(f"freshdesk refused: {exc}") from None
        except OSError as exc:
            raise RetryableDelivery(f"freshdesk unreachable: {type(exc).__name__}") from None
        if answer.status in _RETRYABLE:
            retry_after = parse_retry_after(answer.headers.get("retry-after"))
            if answer.status == 429:
                # Freshdesk's per-minute limit: it always says how long; wait at least a second without it.
                raise RetryableDelivery("freshdesk rate limited (429)", retry_after or 1.0)
            raise RetryableDelivery(f"freshdesk answered {answer.status}", retry_after)
        if not 200 <= answer.status < 300:
            raise PermanentDelivery(f"freshdesk answered {answer.status}")
        if not answer.body.strip():
            return None
        try:
            return json.loads(answer.body)
        except ValueError:
            raise PermanentDelivery(f"freshdesk answered {answer.status} without JSON") from None

    def find_open(self, tag: str) -> int | None:
        query = f"\"tag:'{tag}' AND (status:{OPEN} OR status:{PENDING})\""
        found = self.call("GET", f"/api/v2/search/tickets?query={quote(query, safe='')}")
        results = found.get("results") if isinstance(found, Mapping) else None
        ids = sorted(int(t["id"]) for t in results or [] if isinstance(t, Mapping) and isinstance(t.get("id"), int))
        return ids[0] if ids else None


class FreshdeskDestination(Destination):
    spec: ClassVar[type[DestinationSpec]] = FreshdeskSpec
    order: ClassVar[int] = 20

    def accepts(self, change: Change, subscription: Subscription) -> bool:
        config: FreshdeskConfig = self.config(subscription)
        if change.kind == INCIDENT_KIND:
            return config.incidents and incident_of(change) is not None
        if change.kind not in _TAG_KINDS or change.tag is None or change.asset is None or not worth_telling(change):
            return False
        return change.tag.casefold() in {t.casefold() for t in config.tags}

    def _api(self, config: FreshdeskConfig, subscription: Subscription) -> _Api:
        api_key = subscription.secret("api_key")
        if not api_key:
            raise PermanentDelivery("freshdesk subscription has no api_key")
        override = bool(config.base_url and self.env.settings.outbound.allow_base_url_override)
        base = config.base_url if override and config.base_url else f"https://{config.domain}.freshdesk.com"
        return _Api(self, base, api_key)

    def deliver(self, change: Change, subscription: Subscription, ledger: LedgerScope) -> DeliveryResult:
        config: FreshdeskConfig = self.config(subscription)
        api = self._api(config, subscription)
        catalog = str(config.catalog_url) if config.catalog_url else None
        incident = incident_of(change)
        asset = change.asset or ""
        if incident is not None:
            key, ending = f"incident:{incident.incident_id}", incident.status == "resolved"
        else:
            key, ending = (change.tag or "").casefold(), change.kind == "classification.removed"
        tag = dedup_tag(change.tenant, asset, key)
        anchor = ledger.anchor(ANCHOR, asset, key)
        known = int(anchor["id"]) if anchor and anchor.get("open") and isinstance(anchor.get("id"), int) else None

        if ending:
            open_ticket = known if known is not None else api.find_open(tag)
            if open_ticket is None:
                return DeliveryResult("skipped", "no open freshdesk ticket for this")
            ticket = open_ticket
            self._note(api, ledger, ticket, change, incident)
            ledger.once("status", lambda prior: self._set_status(api, ticket, config.done_status))
            ledger.set_anchor(ANCHOR, asset, key, {"id": ticket, "open": False}, released=True)
            return DeliveryResult("delivered", f"freshdesk ticket set to {config.done_status}", {"id": str(ticket)})

        def ensure(prior: Step | None) -> Mapping[str, Any]:
            # Always look before creating: this is the dedup across subscriptions and after a lost answer.
            found = known if known is not None else api.find_open(tag)
            if found is not None:
                # After an interrupted attempt, an open ticket with our tag is taken to be the one it created.
                return {"id": found, "created": prior is not None and known is None}
            return {"id": self._create(api, config, change, incident, tag, catalog), "created": True}

        ticket_step = ledger.once("ticket", ensure)
        ticket = int(ticket_step["id"])
        ledger.set_anchor(ANCHOR, asset, key, {"id": ticket, "open": True})
        if not ticket_step.get("created"):
            self._note(api, ledger, ticket, change, incident)
            return DeliveryResult("delivered", "freshdesk ticket noted", {"id": str(ticket)})
        return DeliveryResult("delivered", "freshdesk ticket created", {"id": str(ticket)})

    def _create(
        self,
        api: _Api,
        config: FreshdeskConfig,
        change: Change,
        incident: Incident | None,
        tag: str,
        catalog: str | None,
    ) -> int:
        reader = self.env.catalog
        impact = reader.impact(change.tenant, incident.asset) if incident is not None and reader else None
        body: dict[str, Any] = {
            "email": config.email,
            "subject": incident_subject(incident) if incident else tag_subject(change),
            "description": (
                incident_description(change, incident, catalog, impact)
                if incident
                else tag_description(change, catalog)
            ),
            "status": OPEN,
            "priority": config.priority,
            "tags": sorted({*config.ticket_tags, tag}),
        }
        if config.group_id is not None:
            body["group_id"] = config.group_id
        created = api.call("POST", "/api/v2/tickets", body)
        if not isinstance(created, Mapping) or not isinstance(created.get("id"), int):
            raise PermanentDelivery("freshdesk answered a ticket without an id")
        return int(created["id"])

    @staticmethod
    def _note(api: _Api, ledger: LedgerScope, ticket: int, change: Change, incident: Incident | None) -> None:
        marker = ledger.key("note")

        def run(prior: Step | None) -> Mapping[str, Any]:
            if prior is not None:
                conversations = api.call("GET", f"/api/v2/tickets/{ticket}/conversations")
                for entry in conversations if isinstance(conversations, list) else []:
                    if isinstance(entry, Mapping) and marker in str(entry.get("body") or ""):
                        return {"note": entry.get("id")}
            created = api.call(
                "POST", f"/api/v2/tickets/{ticket}/notes", {"body": note(change, incident, marker), "private": True}
            )
            return {"note": created.get("id") if isinstance(created, Mapping) else None}

        ledger.once("note", run)

    @staticmethod
    def _set_status(api: _Api, ticket: int, status: int) -> Mapping[str, Any]:
        # Idempotent: an interrupted attempt's PUT is simply sent again.
        api.call("PUT", f"/api/v2/tickets/{ticket}", {"status": status})
        return {"status": status}
