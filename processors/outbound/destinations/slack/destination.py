"""Slack through slack-sdk's WebClient: one thread per (asset, tag) and per Monte Carlo incident and affected asset,
replies for what follows.

The first message about an (asset, tag) or an (asset, incident) is posted to the channel and its ``channel``/``ts``
kept in the ledger; removal, propagation results, an incident's updates and resolution and Jira links reply with
``thread_ts``. An incident's first message carries the asset's owners and downstream impact (read from the catalog
only when that message is really sent). Slack has no idempotency key, so every message
carries ``metadata.event_payload.dedup_key``: when an earlier attempt died after posting but before the ledger said
so, the message is looked up in the channel (or thread) by that key instead of being posted again.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from catalog.changes import Change
from control.subscriptions.destinations import DestinationSpec
from control.subscriptions.store import Subscription
from metalake.net.ssrf import RefusedAddress
from processors.outbound.destinations.common import (
    INCIDENT_KIND,
    incident_anchor,
    incident_of,
    mapping_get,
    worth_telling,
)
from processors.outbound.destinations.slack.messages import jira_link_message, slack_incident_message, slack_message
from processors.outbound.destinations.slack.pinned import pinned_web_client
from processors.outbound.destinations.slack.spec import SlackConfig, SlackSpec
from processors.outbound.runtime.destination import (
    DeliveryResult,
    Destination,
    PermanentDelivery,
    RetryableDelivery,
)
from processors.outbound.runtime.ledger import LedgerScope, Step
from processors.outbound.runtime.retry import parse_retry_after

THREAD = "slack-thread"
JIRA_ANCHOR = "jira-issue"
_RETRYABLE_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
# How far back an interrupted attempt's message is looked for (it was posted after the step was marked in flight).
_LOOKBACK_S = 120
DEFAULT_KINDS = frozenset({"classification.added", "classification.removed", "propagation.completed"})
# A thread lives as long as its tag is on the asset: after a delivered removal it expires with the ledger's retention,
# a later addition keeps it again.
_REMOVALS = frozenset({"classification.removed", "tag.unpropagated"})
_ADDITIONS = frozenset({"classification.added", "tag.propagated"})


def _header(headers: Mapping[str, Any], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name.lower():
            return str(value[0] if isinstance(value, list) else value)
    return None


class SlackDestination(Destination):
    spec: ClassVar[type[DestinationSpec]] = SlackSpec
    order: ClassVar[int] = 50

    def accepts(self, change: Change, subscription: Subscription) -> bool:
        if change.kind == INCIDENT_KIND:
            config: SlackConfig = self.config(subscription)
            return config.incidents and incident_of(change) is not None
        if change.tag is None or change.asset is None or not worth_telling(change):
            return False
        # Per-asset propagated tags would open one thread per downstream asset: only when asked for by name.
        return change.kind in DEFAULT_KINDS or bool(subscription.filters.event_types)

    def _client(self, config: SlackConfig, subscription: Subscription) -> WebClient:
        outbound = self.env.settings.outbound
        override = bool(config.base_url and outbound.allow_base_url_override)
        base_url = config.base_url if override and config.base_url else outbound.slack_base_url
        token = subscription.secret("token")
        if not token:
            raise PermanentDelivery("slack subscription has no token")
        try:
            # Resolved once, checked, and every connection of the client goes to that address (pinned_slack).
            # Retries are the runtime's (it honours Retry-After and moves on to the retry topic), not the SDK's.
            return pinned_web_client(base_url, guard=self.env.guard, token=token, timeout=int(outbound.http_timeout_s))
        except RefusedAddress as exc:
            raise PermanentDelivery(f"slack base_url refused: {exc}") from None
        except OSError as exc:  # the guard's lookup failed: may be transient
            raise RetryableDelivery(f"slack unreachable: {type(exc).__name__}") from None

    def deliver(self, change: Change, subscription: Subscription, ledger: LedgerScope) -> DeliveryResult:
        config: SlackConfig = self.config(subscription)
        client = self._client(config, subscription)
        incident = incident_of(change)
        asset = change.asset or ""
        tag = incident_anchor(incident) if incident is not None else (change.tag or "").casefold()
        thread = ledger.anchor(THREAD, asset, tag)
        thread_ts = str(thread["ts"]) if thread and thread.get("ts") else None
        channel = str(thread["channel"]) if thread and thread.get("channel") else config.channel
        jira = [(str(a["key"]), str(a.get("url", ""))) for a in ledger.shared(JIRA_ANCHOR, asset, tag)]
        linked = set(thread.get("linked", [])) if thread else set()

        dedup = ledger.key("post")

        def post(prior: Step | None) -> Mapping[str, str]:
            links = [] if thread_ts else jira
            if incident is None:
                args = slack_message(change, dedup, links)
            else:
                # Read only when the message is really sent: a redelivery whose step is done costs no reads.
                reader, opening = self.env.catalog, thread_ts is None
                impact = reader.impact(change.tenant, asset) if opening and reader is not None else None
                catalog = str(config.catalog_url) if config.catalog_url else None
                args = slack_incident_message(
                    change, incident, dedup, opening=opening, impact=impact, catalog_url=catalog, jira_links=links
                )
            return self._post(client, channel, thread_ts, args, dedup, prior)

        posted = ledger.once("post", post)
        if thread_ts is None:
            thread_ts = str(posted["ts"])
            channel = str(posted["channel"])
            ledger.set_anchor(THREAD, asset, tag, {"channel": channel, "ts": thread_ts})
        for key, url in jira:
            if key in linked:
                continue
            link_dedup = ledger.key(f"link:{key}")
            about = f"Monte Carlo incident {incident.incident_id}" if incident is not None else None
            link_args = jira_link_message(key, url, link_dedup, change, about)
            ledger.once(
                f"link:{key}",
                lambda prior, a=link_args, d=link_dedup: self._post(client, channel, thread_ts, a, d, prior),  # type: ignore[misc]
            )
            linked.add(key)
            ledger.set_anchor(THREAD, asset, tag, {"linked": sorted(linked)})
        if change.kind in _REMOVALS or (incident is not None and incident.status == "resolved"):
            ledger.release_anchor(THREAD, asset, tag)
        elif thread is not None and (change.kind in _ADDITIONS or incident is not None):
            ledger.keep_anchor(THREAD, asset, tag)
        return DeliveryResult("delivered", "slack", {"channel": channel, "ts": str(posted["ts"])})

    def _post(
        self,
        client: WebClient,
        channel: str,
        thread_ts: str | None,
        args: Mapping[str, Any],
        dedup_key: str,
        prior: Step | None,
    ) -> Mapping[str, str]:
        try:
            if prior is not None:
                found = self._find(client, channel, thread_ts, dedup_key, prior.started_at)
                if found is not None:
                    return found
            response = client.chat_postMessage(
                channel=channel,
                thread_ts=thread_ts,
                text=str(args["text"]),
                blocks=args["blocks"],
                metadata=args["metadata"],
                unfurl_links=False,
                unfurl_media=False,
            )
        except RefusedAddress as exc:
            # A redirect, or a connection urllib made to another address: never retried into the same answer.
            raise PermanentDelivery(f"slack refused: {exc}") from None
        except SlackApiError as exc:
            status = exc.response.status_code
            error = str(exc.response.get("error", "")) if isinstance(exc.response.data, dict) else ""
            if status == 429 or error == "ratelimited":
                retry_after = parse_retry_after(_header(exc.response.headers, "Retry-After")) or 1.0
                raise RetryableDelivery("slack rate limited (429)", retry_after) from None
            if status >= 500 or error in _RETRYABLE_ERRORS:
                raise RetryableDelivery(f"slack answered {status} {error}".strip()) from None
            raise PermanentDelivery(f"slack answered {status} {error}".strip()) from None
        except (SlackClientError, OSError, ValueError) as exc:
            raise RetryableDelivery(f"slack unreachable: {type(exc).__name__}") from None
        return {"channel": str(response["channel"]), "ts": str(response["ts"])}

    def _find(
        self, client: WebClient, channel: str, thread_ts: str | None, dedup_key: str, since: datetime | None
    ) -> Mapping[str, str] | None:
        oldest = str((since.timestamp() if since else 0) - _LOOKBACK_S)
        if thread_ts:
            page = client.conversations_replies(
                channel=channel, ts=thread_ts, oldest=oldest, include_all_metadata=True, limit=200
            )
        else:
            page = client.conversations_history(channel=channel, oldest=oldest, include_all_metadata=True, limit=200)
        for message in page.get("messages") or []:
            if mapping_get(message, "metadata", "event_payload", "dedup_key") == dedup_key:
                return {"channel": channel, "ts": str(message["ts"])}
        return None
