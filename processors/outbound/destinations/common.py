"""What the destinations people read (Slack, Jira, Teams, Freshdesk) share: how a change is described, and reading
vendor answers.

Texts name assets and tags (which the tenant's own catalog holds) and counts, and for a Monte Carlo incident the
fields Monte Carlo sent for the tenant (summary, severity, owner, link); never other state values or secrets. Each
vendor's format is built in its folder (``slack/messages.py``: Block Kit, ``jira/messages.py``: ADF,
``teams/messages.py``: Adaptive Cards, ``freshdesk/messages.py``: HTML).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from catalog.changes import Change


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def downstream(change: Change) -> tuple[list[str], list[str], int]:
    """(added, removed, reached) of a propagation.completed change."""
    added = [str(u) for u in change.data.get("added") or []]
    removed = [str(u) for u in change.data.get("removed") or []]
    reached = change.data.get("reached")
    return added, removed, int(reached) if isinstance(reached, int) else len(added)


def worth_telling(change: Change) -> bool:
    """False for a propagation run that neither added nor removed anything (people have nothing new to read)."""
    if change.kind != "propagation.completed":
        return True
    added, removed, _ = downstream(change)
    return bool(added or removed)


def applied_by(change: Change) -> str:
    state = change.state
    actor, source = state.get("actor"), state.get("source")
    if isinstance(actor, str) and actor:
        return actor
    if source == "auto":
        confidence = state.get("confidence")
        return f"auto-classifier (confidence {confidence})" if confidence is not None else "auto-classifier"
    return str(source or "unknown")


def headline(change: Change) -> str:
    asset, tag = change.asset or "(unknown asset)", change.tag or "(tag)"
    kind = change.kind
    if kind == "classification.added":
        return f"{tag} tag added to {asset}"
    if kind == "classification.removed":
        return f"{tag} tag removed from {asset}"
    if kind == "propagation.completed":
        added, removed, reached = downstream(change)
        truncated = " (truncated)" if change.data.get("truncated") else ""
        return (
            f"{tag} on {asset} propagated to {reached} downstream asset(s){truncated}: "
            f"+{len(added)} added, -{len(removed)} removed"
        )
    if kind == "tag.propagated":
        return f"{tag} tag propagated to {asset}"
    if kind == "tag.unpropagated":
        return f"{tag} tag no longer propagated to {asset}"
    return f"{kind} on {asset}"


def mapping_get(value: Any, *path: str) -> Any:  # noqa: ANN401
    for name in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(name)
    return value


INCIDENT_KIND = "incidents.changed"


@dataclass(frozen=True)
class Incident:
    """A Monte Carlo incident row as ``metalake.changes`` carries it (table ``incidents``, one row per incident and
    affected table); ``status`` is ``opened``, ``updated`` or ``resolved``."""

    incident_id: str
    asset: str
    status: str
    summary: str | None
    severity: str | None
    owner: str | None
    url: str | None
    incident_type: str | None


def incident_of(change: Change) -> Incident | None:
    """The incident a change carries, or ``None`` for any other change (or a deleted row: an erase, not news)."""
    if change.kind != INCIDENT_KIND:
        return None
    key, state = change.data.get("key"), change.state
    if not isinstance(key, Mapping) or change.asset is None:
        return None

    def text(name: str) -> str | None:
        value = state.get(name)
        return str(value) if isinstance(value, str) and value else None

    incident_id, status = key.get("incident_id"), text("status")
    if not isinstance(incident_id, str) or status is None:
        return None
    return Incident(
        incident_id,
        change.asset,
        status,
        text("summary"),
        text("severity"),
        text("owner"),
        text("url"),
        text("incident_type"),
    )


def incident_headline(incident: Incident) -> str:
    verb = {"opened": "opened on", "updated": "updated on", "resolved": "resolved on"}.get(
        incident.status, f"{incident.status} on"
    )
    return f"Monte Carlo incident {verb} {incident.asset}"


def impact_lines(owners: Sequence[str], downstream: Sequence[str], truncated: bool, limit: int) -> list[str]:
    """How an incident's reach reads: its owners, then how many assets lie downstream and the first ``limit``."""
    lines = [f"Owners: {', '.join(owners)}" if owners else "Owners: none recorded"]
    more = "+" if truncated else ""
    lines.append(f"Downstream impact: {len(downstream)}{more} asset(s) reached by lineage")
    lines += [f"- {u}" for u in downstream[:limit]]
    if len(downstream) > limit:
        lines.append(f"- … and {len(downstream) - limit}{more} more")
    return lines


def asset_link(catalog_url: str | None, tenant: str, asset: str) -> str | None:
    """The asset in the catalog's API (``GET /v1/tenants/{tenant}/assets?urn=``) under ``catalog_url``, if one is
    configured (the runtime does not know the address people reach the API at)."""
    if not catalog_url:
        return None
    return f"{catalog_url.rstrip('/')}/v1/tenants/{quote(tenant, safe='')}/assets?urn={quote(asset, safe='')}"


def incident_anchor(incident: Incident) -> str:
    """The ledger anchor key of an incident's thread or issue, in the place of a tag: ``#`` never starts a tag, so an
    incident never shares a tag's anchor; Jira shares its incident issue under it for Slack to link."""
    return f"#incident:{incident.incident_id}"


def web_link(url: str | None, limit: int = 3000) -> str | None:
    """``url`` if it is an absolute http(s) URL of at most ``limit`` characters, else ``None``: a link Slack (button
    ``url``: at most 3000) and Jira (an ADF link mark) refuse would fail the whole message, for a field the sender
    chose (an incident's ``url`` comes from Monte Carlo's payload)."""
    if not url or len(url) > limit:
        return None
    parts = urlsplit(url)
    return url if parts.scheme in ("http", "https") and parts.netloc and not any(c.isspace() for c in url) else None
