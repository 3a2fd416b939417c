"""Per-tenant caps on the objects a tenant creates: one mechanism for every kind.

Without them a tenant could create API clients, write keys, connectors, subscriptions and share links without end,
each a document in the control plane every tenant shares (and each client a rate budget of its own). A create route
holds the tenant's *claim* on its kind while it counts the live objects and writes the new one::

    with quotas.claim(ctx, tenant, quotas.CONNECTORS):
        record = store.create(...)

At the cap the claim raises ``409 quota-exceeded`` (problem+json naming ``kind`` and ``cap``). Claims of one tenant
and kind are serialised within a process, so a burst of creates cannot overshoot there; API processes count
independently, so N processes creating at the same instant may overshoot by at most N - 1.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from api.context import ApiContext
from api.problems import Problem, problem_doc
from api.services.shares import SHARES_COLLECTION
from api.settings import AdminApiSettings
from control.auth.clients import CLIENTS_COLLECTION
from control.connectors.secrets import SECRETS
from control.connectors.store import CONNECTORS
from control.subscriptions.store import SUBSCRIPTIONS
from tenants.naming import CONTROL_DATABASE

CLIENTS = "clients"
WRITE_KEYS = "write_keys"
CONNECTORS_KIND = "connectors"
SUBSCRIPTIONS_KIND = "subscriptions"
SHARE_LINKS = "share_links"
ENGINES = "engines"


@dataclass(frozen=True)
class Kind:
    collection: str
    live: Callable[[str], dict[str, Any]]  # the query of a tenant's objects that count
    cap: Callable[[AdminApiSettings], int]


KINDS: dict[str, Kind] = {
    CLIENTS: Kind(CLIENTS_COLLECTION, lambda t: {"tenant": t, "state": "active"}, lambda s: s.api.quotas.clients),
    WRITE_KEYS: Kind(
        SECRETS,
        lambda t: {"tenant": t, "key_id": {"$exists": True}, "revoked": {"$ne": True}},
        lambda s: s.api.quotas.write_keys,
    ),
    CONNECTORS_KIND: Kind(CONNECTORS, lambda t: {"tenant": t}, lambda s: s.api.quotas.connectors),
    SUBSCRIPTIONS_KIND: Kind(SUBSCRIPTIONS, lambda t: {"tenant": t}, lambda s: s.api.quotas.subscriptions),
    SHARE_LINKS: Kind(SHARES_COLLECTION, lambda t: {"tenant": t}, lambda s: s.api.quotas.share_links),
    # The query engines' cap (its own setting, older than this module), counted the same way.
    ENGINES: Kind("engines", lambda t: {"tenant": t}, lambda s: s.enforcement.max_engines_per_tenant),
}

# Striped locks: bounded memory whatever the number of tenants; two claims sharing a stripe only wait for each other.
_STRIPES = [threading.Lock() for _ in range(64)]


# The OpenAPI entry of a create route's 409 (routes whose 409 has another meaning too say both).
RESPONSE: dict[int | str, dict[str, Any]] = {
    409: problem_doc("the tenant holds its cap of this kind of object (`kind`, `cap`)", "quota-exceeded", 409)
}


def quota_exceeded(kind: str, cap: int) -> Problem:
    return Problem(
        409,
        "quota-exceeded",
        f"the tenant holds {cap} {kind.replace('_', ' ')}, its cap; remove one before creating another",
        extra={"kind": kind, "cap": cap},
    )


def check(ctx: ApiContext, tenant: str, kind: str) -> None:
    """409 ``quota-exceeded`` if ``tenant`` holds its cap of ``kind`` now."""
    spec = KINDS[kind]
    cap = spec.cap(ctx.settings)
    held = ctx.mongo[CONTROL_DATABASE][spec.collection].count_documents(spec.live(tenant), limit=cap)
    if held >= cap:
        raise quota_exceeded(kind, cap)


@contextmanager
def claim(ctx: ApiContext, tenant: str, kind: str) -> Iterator[None]:
    """Hold ``tenant``'s claim on one more ``kind`` while it is created (blocking: run it off the event loop)."""
    with _STRIPES[zlib.crc32(f"{tenant}/{kind}".encode()) % len(_STRIPES)]:
        check(ctx, tenant, kind)
        yield
