"""Freshdesk ticket subjects, descriptions and notes (HTML, every value escaped) for a change, built purely."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from catalog.changes import Change
from processors.outbound.destinations.common import (
    Incident,
    applied_by,
    asset_link,
    cut,
    downstream,
    headline,
    impact_lines,
    incident_headline,
    web_link,
)

if TYPE_CHECKING:
    from processors.outbound.runtime.catalog import Impact

SUBJECT_MAX = 255
DOWNSTREAM_LIST_MAX = 50


def _p(text: str) -> str:
    return f"<p>{escape(text)}</p>"


def _link(url: str | None, label: str) -> str:
    # Only an absolute http(s) URL becomes a link: an incident's url is what Monte Carlo's payload said.
    checked = web_link(url)
    return f'<p><a href="{escape(checked, quote=True)}">{escape(label)}</a></p>' if checked else ""


def _downstream_list(change: Change) -> str:
    if change.kind != "propagation.completed":
        return ""
    added, _, _ = downstream(change)
    items = [f"<li>{escape(u)}</li>" for u in added[:DOWNSTREAM_LIST_MAX]]
    if len(added) > DOWNSTREAM_LIST_MAX:
        items.append(f"<li>… and {len(added) - DOWNSTREAM_LIST_MAX} more</li>")
    return f"<ul>{''.join(items)}</ul>" if items else ""


def _footer(change: Change) -> str:
    return _p(f"Reported by metalake for tenant {change.tenant} (change {change.id}).")


def tag_subject(change: Change) -> str:
    return cut(f"[{change.tag}] {change.asset} tagged {change.tag}: review downstream assets", SUBJECT_MAX)


def tag_description(change: Change, catalog_url: str | None) -> str:
    first = (
        headline(change)
        if change.kind == "propagation.completed"
        else (f"{change.asset} was tagged {change.tag} by {applied_by(change)}.")
    )
    link = asset_link(catalog_url, change.tenant, change.asset or "")
    return _p(first) + _downstream_list(change) + _link(link, "Open the asset in metalake") + _footer(change)


def incident_subject(incident: Incident) -> str:
    summary = f": {incident.summary}" if incident.summary else ""
    return cut(f"[Monte Carlo] Incident on {incident.asset}{summary}", SUBJECT_MAX)


def incident_description(
    change: Change, incident: Incident, catalog_url: str | None, impact: Impact | None = None
) -> str:
    facts = [("Incident", incident.incident_id), ("Status", incident.status)]
    facts += [
        (t, v)
        for t, v in (("Type", incident.incident_type), ("Severity", incident.severity), ("Owner", incident.owner))
        if v
    ]
    rows = "".join(f"<li>{escape(t)}: {escape(v)}</li>" for t, v in facts)
    parts = [_p(incident_headline(incident)), f"<ul>{rows}</ul>"]
    if incident.summary:
        parts.append(_p(incident.summary))
    if impact is not None:
        owners, reach, *listed = impact_lines(impact.owners, impact.downstream, impact.truncated, DOWNSTREAM_LIST_MAX)
        parts += [_p(owners), _p(reach)]
        if listed:
            parts.append("<ul>" + "".join(f"<li>{escape(i.removeprefix('- '))}</li>" for i in listed) + "</ul>")
    parts.append(_link(incident.url, "Open in Monte Carlo"))
    parts.append(_link(asset_link(catalog_url, change.tenant, incident.asset), "Open the asset in metalake"))
    parts.append(_footer(change))
    return "".join(parts)


def note(change: Change, incident: Incident | None, marker: str) -> str:
    """A private note on an open ticket; ``marker`` lets an interrupted attempt find its own note."""
    if incident is not None:
        text = incident_headline(incident) + (f": {incident.summary}" if incident.summary else "")
        if incident.severity:
            text += f" (severity {incident.severity})"
        body = _p(text)
    else:
        body = _p(headline(change)) + _downstream_list(change)
    return body + _p(f"[metalake {marker}]")
