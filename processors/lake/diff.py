"""The difference between a state table in Delta and its MongoDB collection, keyed by document id. Pure.

Only ``(version, event_id)`` is compared: every projected field is written together with them by the same guarded
upsert, so equal versions mean equal documents unless someone edited MongoDB by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Held = tuple[Any, Any]  # (version, event_id) as stored; either may be missing in a hand-edited document


@dataclass
class Difference:
    """Document ids, by kind of difference. ``behind``: MongoDB holds an older (version, event_id) than Delta;
    ``ahead``: a newer one (impossible from the job, which writes Delta first: a hand edit or corruption)."""

    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    behind: list[str] = field(default_factory=list)
    ahead: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.missing) + len(self.extra) + len(self.behind) + len(self.ahead)

    def counts(self) -> dict[str, int]:
        return {
            "missing": len(self.missing),
            "extra": len(self.extra),
            "behind": len(self.behind),
            "ahead": len(self.ahead),
        }


def _order(held: Held) -> tuple[int, str]:
    version, event_id = held
    return (version if isinstance(version, int) else -1, event_id if isinstance(event_id, str) else "")


def compare(delta: Mapping[str, Held], mongo: Mapping[str, Held], ignore: Iterable[str] = ()) -> Difference:
    """Compare Delta's ``{id: (version, event_id)}`` with MongoDB's. ``ignore``: ids that MongoDB may lack on
    purpose (outside the recent window); they count as neither missing nor extra."""
    skipped = set(ignore)
    diff = Difference()
    for doc_id in sorted(delta.keys() - mongo.keys() - skipped):
        diff.missing.append(doc_id)
    for doc_id in sorted(mongo.keys() - delta.keys()):
        diff.extra.append(doc_id)
    for doc_id in sorted(delta.keys() & mongo.keys()):
        d, m = delta[doc_id], mongo[doc_id]
        if d == m:
            continue
        (diff.behind if _order(m) < _order(d) else diff.ahead).append(doc_id)
    return diff
