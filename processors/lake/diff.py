"""The difference between a state table in Delta and its MongoDB collection, keyed by document id. Pure.

Only ``(version, event_id)`` is compared: every projected field is written together with them by the same guarded
upsert, so equal versions mean equal documents unless someone edited MongoDB by hand. The assets' health is the
exception (``compare_health``): a separate step writes it with its own version pair, so its values are compared too.
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


def _health_pair(values: Mapping[str, Any]) -> Held:
    return (values.get("health_version"), values.get("health_event_id"))


def compare_health(
    delta: Mapping[str, Mapping[str, Any]], mongo: Mapping[str, Mapping[str, Any]], fields: Iterable[str]
) -> Difference:
    """Compare the health ``fields`` (values and their version pair) of the assets both sides hold; an asset on one
    side only is the assets comparison's business. A missing field equals null (FerretDB may leave one out).

    ``missing``: MongoDB holds no health value at all; ``behind``: an older version pair; ``ahead``: a newer pair,
    or the same pair with other values (a hand edit either way: the job writes Delta first). ``extra`` stays empty."""
    names = tuple(fields)
    diff = Difference()
    for doc_id in sorted(delta.keys() & mongo.keys()):
        d, m = delta[doc_id], mongo[doc_id]
        if all(d.get(f) == m.get(f) for f in names):
            continue
        if all(m.get(f) is None for f in names):
            diff.missing.append(doc_id)
        elif _order(_health_pair(m)) < _order(_health_pair(d)):
            diff.behind.append(doc_id)
        else:
            diff.ahead.append(doc_id)
    return diff


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
