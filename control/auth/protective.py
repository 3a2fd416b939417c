"""Which tags protect data, for :mod:`control.auth.pii`'s rule: the PII tags (``access.pii_tags``, they mask columns)
and the tags that filter rows in a customer's Trino (docs/enforcement.md): ``access.protective_tags`` (``consent``,
every engine's default consent tag) and the ``consent_tag`` of each of the tenant's registered engines. Taking one
off, or stopping it spreading, shows rows or values to users without the PII grant, so every path that changes tags
treats them alike.

The engines are read from the control plane once per tenant per ``ttl_s`` (per process): a newly registered engine's
consent tag is protected within that delay.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from pymongo.database import Database

# The control plane's engine registrations (api.services.enforcement writes them).
ENGINES_COLLECTION = "engines"


def literal(tag: str) -> str:
    """An fnmatch pattern matching ``tag`` alone (a consent tag is a name, not a pattern)."""
    return re.sub(r"([*?\[])", r"[\1]", tag)


def protective_patterns(
    pii_tags: Iterable[str], protective_tags: Iterable[str], consent_tags: Iterable[str]
) -> tuple[str, ...]:
    """Every pattern whose tags :func:`control.auth.pii.weakening` guards, without duplicates, in a stable order."""
    out = dict.fromkeys([*pii_tags, *protective_tags, *sorted(literal(t) for t in consent_tags)])
    return tuple(out)


class ProtectiveTags:
    """:func:`protective_patterns` of each tenant, its engines' consent tags cached ``ttl_s`` seconds (at most
    ``max_tenants`` tenants, least recently used out first). Thread-safe."""

    def __init__(
        self,
        control: Database[Any],
        pii_tags: Iterable[str],
        protective_tags: Iterable[str],
        *,
        ttl_s: float,
        max_tenants: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engines = control[ENGINES_COLLECTION]
        self._base = (tuple(pii_tags), tuple(protective_tags))
        self._ttl_s, self._max, self._clock = ttl_s, max_tenants, clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[float, tuple[str, ...]]] = OrderedDict()

    def _load(self, tenant: str) -> tuple[str, ...]:
        docs = self._engines.find({"tenant": tenant}, {"_id": 0, "consent_tag": 1})
        tags = {d["consent_tag"] for d in docs if isinstance(d.get("consent_tag"), str)}
        return protective_patterns(*self._base, tags)

    def patterns(self, tenant: str) -> tuple[str, ...]:
        now = self._clock()
        with self._lock:
            hit = self._entries.get(tenant)
            if hit is not None and hit[0] > now:
                self._entries.move_to_end(tenant)
                return hit[1]
        patterns = self._load(tenant)
        with self._lock:
            self._entries[tenant] = (now + self._ttl_s, patterns)
            self._entries.move_to_end(tenant)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return patterns
