"""What the outbound runtime does with ``io.metalake.asset.erased.v1`` (a GDPR erase of one asset completed).

The erase names the asset by a hash of its URN (``urn_sha256``: a keyed hash where the platform has a key-encryption
key, else the plain sha256), never by the URN. Here:

- the delivery ledger forgets the asset: its ``anchor`` and ``shared`` documents (Slack thread, Jira issue,
  Freshdesk ticket references) hold the URN in clear and, for a tag still on the asset when it was erased, never
  expire; every one of the tenant's whose asset hashes to the erased one (or, with ``include_children``, lies under
  it: ``urn + "/"``) is deleted, so metalake keeps no copy of the URN in its outbound state;
- signed webhooks that subscribed to ``asset.erased`` receive the announcement (``destinations/webhook``);
- what Slack, Jira, Teams and Freshdesk keep is not reached (docs/outbound.md, "GDPR erase").

``candidates`` gives every hash a record about a URN may hold; the default is the plain sha256. A runtime that knows
the platform's keyed hash passes its candidates (``control.erased.UrnHasher.candidates``)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Collection

from catalog.changes import ASSET_ERASED, Change
from processors.outbound.runtime.ledger import Ledger

log = logging.getLogger(__name__)

Candidates = Callable[[str], Collection[str]]


def plain_sha256(urn: str) -> Collection[str]:
    return {hashlib.sha256(urn.encode()).hexdigest()}


def _lineage(urn: str) -> list[str]:
    """``urn`` and the URNs it lies under (``a/b/c``: ``a/b/c``, ``a/b``, ``a``)."""
    parts = urn.split("/")
    return ["/".join(parts[:n]) for n in range(len(parts), 0, -1)]


def erased_urn_matcher(change: Change, candidates: Candidates = plain_sha256) -> Callable[[str], bool] | None:
    """Whether a URN is the one ``change`` erased (or under it, with children); ``None`` for any other change."""
    target = change.data.get("urn_sha256")
    if change.type != ASSET_ERASED or not isinstance(target, str) or not target:
        return None
    children = bool(change.data.get("include_children"))

    def erased(urn: str) -> bool:
        names = _lineage(urn) if children else [urn]
        return any(target in candidates(name) for name in names)

    return erased


def forget_erased(ledger: Ledger, change: Change, candidates: Candidates = plain_sha256) -> int:
    """Delete the tenant's ledger anchors naming the URN ``change`` erased; how many went (0 for other changes)."""
    erased = erased_urn_matcher(change, candidates)
    if erased is None:
        return 0
    gone = ledger.forget_assets(change.tenant, erased)
    log.info("outbound.erased_forgotten", extra={"tenant": change.tenant, "change_id": change.id, "anchors": gone})
    return gone
