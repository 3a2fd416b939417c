"""Tenants' outbound subscriptions in the control plane (MongoDB ``metalake_control``).

Two collections, so reading a subscription can never carry a secret by accident:

- ``subscriptions``: ``{_id: "<tenant>/<name>", tenant, name, destination, config, filters, enabled, secret_fields,
  created_at, updated_at}``;
- ``subscription_secrets``: ``{_id, tenant, name, values: {field: value}}``, written and read only here; values leave
  as :class:`pydantic.SecretStr` and are never returned by the API or logged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, TypedDict

from pydantic import SecretStr
from pymongo import ASCENDING
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from control.subscriptions.filters import Filters
from metalake.mongo import Doc, typed_collection
from tenants.naming import validate_tenant_id

SUBSCRIPTIONS = "subscriptions"
SUBSCRIPTION_SECRETS = "subscription_secrets"
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


class InvalidSubscriptionName(ValueError):
    pass


def subscription_id(tenant: str, name: str) -> str:
    return f"{tenant}/{name}"


def validate_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise InvalidSubscriptionName("a subscription name matches [a-z][a-z0-9-]{0,62}")
    return name


@dataclass(frozen=True)
class Subscription:
    """One destination of a tenant. ``secrets`` is filled only for delivery (never by reads for the API)."""

    tenant: str
    name: str
    destination: str
    config: Mapping[str, Any]
    filters: Filters = field(default_factory=Filters)
    enabled: bool = True
    secret_fields: tuple[str, ...] = ()
    created_at: datetime | None = None
    updated_at: datetime | None = None
    secrets: Mapping[str, SecretStr] = field(default_factory=dict, repr=False)

    def secret(self, name: str) -> str | None:
        value = self.secrets.get(name)
        return value.get_secret_value() if value is not None else None


class SubscriptionDoc(TypedDict):
    """A document of ``subscriptions``, as :meth:`SubscriptionStore.create` inserts it."""

    _id: str
    tenant: str
    name: str
    destination: str
    # The destination's configuration without its secret fields.
    config: dict[str, Any]
    # Filters dumped in JSON mode.
    filters: dict[str, Any]
    enabled: bool
    secret_fields: list[str]
    created_at: datetime
    updated_at: datetime


class SubscriptionSecretsDoc(TypedDict):
    """A document of ``subscription_secrets`` (``_id`` is the subscription's): the secret fields' values in clear."""

    _id: str
    tenant: str
    name: str
    values: dict[str, str]


def _record(doc: SubscriptionDoc, secrets: Mapping[str, str] | None = None) -> Subscription:
    return Subscription(
        tenant=doc["tenant"],
        name=doc["name"],
        destination=doc["destination"],
        config=dict(doc.get("config") or {}),
        filters=Filters.model_validate(doc.get("filters") or {}),
        enabled=bool(doc.get("enabled", True)),
        secret_fields=tuple(doc.get("secret_fields") or ()),
        created_at=doc.get("created_at"),
        updated_at=doc.get("updated_at"),
        secrets={k: SecretStr(v) for k, v in (secrets or {}).items()},
    )


class SubscriptionStore:
    def __init__(self, database: Database[Doc]) -> None:
        self._subs: Collection[SubscriptionDoc] = typed_collection(database, SUBSCRIPTIONS, SubscriptionDoc)
        self._secrets: Collection[SubscriptionSecretsDoc] = typed_collection(
            database, SUBSCRIPTION_SECRETS, SubscriptionSecretsDoc
        )

    def create(
        self,
        tenant: str,
        name: str,
        destination: str,
        config: Mapping[str, Any],
        filters: Filters,
        secrets: Mapping[str, str],
        *,
        enabled: bool = True,
    ) -> Subscription | None:
        """Insert a new subscription; ``None`` if the name is taken. The document is inserted disabled, then the
        secrets are written, then it is enabled as asked: the insert decides a race for the name, and the runtime
        (which reads enabled subscriptions only) never sees one without its secrets."""
        validate_tenant_id(tenant)
        validate_name(name)
        doc_id = subscription_id(tenant, name)
        now = datetime.now(UTC)
        doc: SubscriptionDoc = {
            "_id": doc_id,
            "tenant": tenant,
            "name": name,
            "destination": destination,
            "config": dict(config),
            "filters": filters.model_dump(mode="json"),
            "enabled": False,
            "secret_fields": sorted(secrets),
            "created_at": now,
            "updated_at": now,
        }
        try:
            self._subs.insert_one(doc)
        except DuplicateKeyError:
            return None
        stored: SubscriptionSecretsDoc = {"_id": doc_id, "tenant": tenant, "name": name, "values": dict(secrets)}
        self._secrets.replace_one({"_id": doc_id}, stored, upsert=True)
        if enabled:
            self._subs.update_one({"_id": doc_id}, {"$set": {"enabled": True}})
        return self.get(tenant, name)

    def update(
        self,
        tenant: str,
        name: str,
        *,
        config: Mapping[str, Any] | None = None,
        filters: Filters | None = None,
        enabled: bool | None = None,
        secrets: Mapping[str, str] | None = None,
    ) -> Subscription | None:
        doc_id = subscription_id(tenant, name)
        changes: Doc = {"updated_at": datetime.now(UTC)}
        if config is not None:
            changes["config"] = dict(config)
        if filters is not None:
            changes["filters"] = filters.model_dump(mode="json")
        if enabled is not None:
            changes["enabled"] = enabled
        if secrets is not None:
            self._secrets.update_one(
                {"_id": doc_id},
                {"$set": {"values": dict(secrets), "tenant": tenant, "name": name}},
                upsert=True,
            )
            changes["secret_fields"] = sorted(secrets)
        result = self._subs.update_one({"_id": doc_id}, {"$set": changes})
        return self.get(tenant, name) if result.matched_count else None

    def get(self, tenant: str, name: str) -> Subscription | None:
        doc = self._subs.find_one({"_id": subscription_id(tenant, name)})
        return _record(doc) if doc is not None else None

    def stored_secrets(self, tenant: str, name: str) -> dict[str, str]:
        """Plain secret values, for merging an update and for delivery only. Never serialise the result."""
        doc = self._secrets.find_one({"_id": subscription_id(tenant, name)})
        return dict(doc.get("values") or {}) if doc is not None else {}

    def with_secrets(self, sub: Subscription) -> Subscription:
        return replace(sub, secrets={k: SecretStr(v) for k, v in self.stored_secrets(sub.tenant, sub.name).items()})

    def page(self, tenant: str, *, after: str | None = None, limit: int | None = None) -> list[Subscription]:
        query: Doc = {"tenant": tenant}
        if after is not None:
            query["name"] = {"$gt": after}
        cursor = self._subs.find(query).sort("name", ASCENDING)
        if limit is not None:
            cursor = cursor.limit(limit)
        return [_record(d) for d in cursor]

    def active(self, tenant: str) -> list[Subscription]:
        """The tenant's enabled subscriptions with their secrets, for delivery."""
        subs = [_record(d) for d in self._subs.find({"tenant": tenant, "enabled": True}).sort("name", ASCENDING)]
        # One lookup by `_id` per subscription: FerretDB pushes `_id` equality down to an index, never `$in` (that
        # read would scan every tenant's secrets).
        return [self.with_secrets(s) for s in subs]

    def delete(self, tenant: str, name: str) -> bool:
        doc_id = subscription_id(tenant, name)
        deleted = self._subs.delete_one({"_id": doc_id}).deleted_count > 0
        self._secrets.delete_one({"_id": doc_id})
        return deleted
