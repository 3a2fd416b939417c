"""Which of the dead letters carrying a tenant's id are that tenant's letters now. See docs/dead-letters.md.

The DLQ topics keep a letter until their retention, whatever happens to its tenant meanwhile:

- **A re-registered tenant id** must not inherit the letters of the tenant that held the id before (deleted since):
  a letter belongs to one registration, the one whose registry document's ``created_at`` it follows. Letters older
  than the tenant's registration are not its letters. An unregistered tenant (pooled, as tests and the demo use) has
  no registration time: all its letters are its. A deletion takes far longer than any clock skew between the hosts
  that write letters and the registry, so the old registration's letters are all older than the new one.
- **An erased asset**: a letter whose records spell a URN the tenant erased (``control.erased``) is not listed,
  shown nor replayed; nor is a replay whose records (a connector letter mapped again, say) would name one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pymongo.database import Database

from api.services.dead_letters.letters import StoredLetter
from api.settings import AdminApiSettings
from control.erased import PLAIN, ErasedFilter, ErasedSet, ErasedUrns, urn_hasher
from metalake.kafka import RawRecord
from metalake.mongo import Doc
from tenants.registry import TenantLookup, TenantRegistry


@dataclass
class LetterScope:
    """One tenant's view of the DLQ letters for one request."""

    registered_at: datetime | None
    erased: ErasedFilter

    def admits(self, stored: StoredLetter) -> bool:
        if self.registered_at is not None and stored.time < self.registered_at:
            return False  # a previous registration's letter
        return not self.erased.spells_erased([stored.key, stored.value, *(v for _, v in stored.headers)])

    def names_erased(self, records: Sequence[RawRecord]) -> bool:
        """Whether replaying ``records`` would publish an erased asset again."""
        return any(self.erased.spells_erased([r.key, r.value, *(v for _, v in r.headers or ())]) for r in records)


def everything(_tenant: str) -> LetterScope:
    """No registration time and nothing erased: every letter of the tenant's id (tests that are about other things)."""
    return LetterScope(None, ErasedFilter(ErasedSet(), PLAIN))


class LetterScopes:
    """Builds a tenant's :class:`LetterScope` from the registry and its erased set (two reads of the control plane)."""

    def __init__(
        self, database: Database[Doc], settings: AdminApiSettings, registry: TenantLookup | None = None
    ) -> None:
        self._registry = registry if registry is not None else TenantRegistry(database)
        self._erased = ErasedUrns(database)
        self._hasher = urn_hasher(settings)

    def __call__(self, tenant: str) -> LetterScope:
        record = self._registry.get(tenant)
        registered = record.created_at if record is not None else None
        if registered is not None and registered.tzinfo is None:
            registered = registered.replace(tzinfo=UTC)
        return LetterScope(registered, ErasedFilter(self._erased.of(tenant), self._hasher))
