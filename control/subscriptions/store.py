"""Tenants' outbound subscriptions in the control plane (MongoDB ``metalake_control``).

Two collections, so reading a subscription can never carry a secret by accident:

- ``subscriptions``: ``{_id: "<tenant>/<name>", tenant, name, destination, config, filters, enabled, secret_fields,
  created_at, updated_at}``;
- ``subscription_secrets``: ``{_id, tenant, name, values: {field: sealed}}``, written and read only here. Each value
  is sealed (``metalake.sealing``) bound to the tenant, this document and the field; values leave as
  :class:`pydantic.SecretStr`, only for delivery and for merging an update, and are never returned by the API or
  logged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypedDict

from pydantic import SecretStr
from pymongo import ASCENDING
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from control.subscriptions.filters import Filters
from metalake.mongo import Doc, typed_collection
from metalake.sealing import Binding, ResealCount, SealedValue, Sealer, SealingError, require
from tenants.naming import validate_tenant_id

SUBSCRIPTIONS = "subscriptions"
SUBSCRIPTION_SECRETS = "subscription_secrets"
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,62}$")

log = logging.getLogger(__name__)


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
    """A document of ``subscription_secrets`` (``_id`` is the subscription's): the secret fields' values, sealed
    (a plain string is a value written before sealing: refused on read, sealed by ``metalake secrets reseal``)."""

    _id: str
    tenant: str
    name: str
    values: dict[str, SealedValue | str]


def secret_binding(tenant: str, name: str, field: str) -> Binding:
    """What a subscription's secret is sealed for: moved to another tenant, subscription or field, it does not open."""
    return Binding(tenant, f"{SUBSCRIPTION_SECRETS}/{subscription_id(tenant, name)}", f"values.{field}")


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
    """``sealer``: the keys secrets are sealed with (the process's, ``metalake.sealing.sealer_for``, built by its entry
    point); ``None``: no key, and only a secret written or read fails, so a process that touches none needs no key."""

    def __init__(self, database: Database[Doc], sealer: Sealer | None = None) -> None:
        self._subs: Collection[SubscriptionDoc] = typed_collection(database, SUBSCRIPTIONS, SubscriptionDoc)
        self._secrets: Collection[SubscriptionSecretsDoc] = typed_collection(
            database, SUBSCRIPTION_SECRETS, SubscriptionSecretsDoc
        )
        self._sealer = sealer

    def _keys(self) -> Sealer:
        return require(self._sealer)

    def _sealed(self, tenant: str, name: str, values: Mapping[str, str]) -> dict[str, SealedValue | str]:
        keys = self._keys()
        return {k: keys.seal(v, secret_binding(tenant, name, k)) for k, v in values.items()}

    def create(  # noqa: PLR0913
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
        # Sealed before anything is written: without a key nothing is stored, not even the name.
        values = self._sealed(tenant, name, secrets)
        try:
            self._subs.insert_one(doc)
        except DuplicateKeyError:
            return None
        stored: SubscriptionSecretsDoc = {"_id": doc_id, "tenant": tenant, "name": name, "values": values}
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
                {"$set": {"values": self._sealed(tenant, name, secrets), "tenant": tenant, "name": name}},
                upsert=True,
            )
            changes["secret_fields"] = sorted(secrets)
        result = self._subs.update_one({"_id": doc_id}, {"$set": changes})
        return self.get(tenant, name) if result.matched_count else None

    def get(self, tenant: str, name: str) -> Subscription | None:
        doc = self._subs.find_one({"_id": subscription_id(tenant, name)})
        return _record(doc) if doc is not None else None

    def stored_secrets(self, tenant: str, name: str) -> dict[str, str]:
        """Plain secret values, for merging an update and for delivery only. Never serialise the result. Raises
        :class:`~metalake.sealing.SealingError` when a value does not open (never a plain value instead)."""
        doc = self._secrets.find_one({"_id": subscription_id(tenant, name)})
        if doc is None:
            return {}
        keys = self._keys()
        return {
            k: keys.open(v, secret_binding(tenant, name, k)).get_secret_value()
            for k, v in (doc.get("values") or {}).items()
        }

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
        out = []
        for sub in subs:
            try:
                out.append(self.with_secrets(sub))
            except SealingError as exc:
                # Left out rather than delivered without its secrets (or failing every other subscription): the
                # operator's key configuration is at fault, and the log says which one and how to fix it.
                log.error(
                    "outbound.subscription_secrets_unusable",
                    extra={"tenant": tenant, "subscription": sub.name, "reason": str(exc)},
                )
        return out

    def reseal(self, tenant: str | None = None) -> ResealCount:
        """Every stored secret (of ``tenant``, or all) sealed under the current key, plain ones too; each document
        rewritten only if its values are unchanged since they were read, so a concurrent update is never undone."""
        keys, count = self._keys(), ResealCount()
        for doc in self._secrets.find({} if tenant is None else {"tenant": tenant}):
            owner, name, values = doc["tenant"], doc["name"], dict(doc.get("values") or {})
            resealed = count.each(keys, values, partial(secret_binding, owner, name))
            if resealed is not None:
                done = self._secrets.update_one({"_id": doc["_id"], "values": values}, {"$set": {"values": resealed}})
                count.written(done.matched_count == 1, f"{SUBSCRIPTION_SECRETS}/{doc['_id']}")
        return count

    def delete(self, tenant: str, name: str) -> bool:
        doc_id = subscription_id(tenant, name)
        deleted = self._subs.delete_one({"_id": doc_id}).deleted_count > 0
        self._secrets.delete_one({"_id": doc_id})
        return deleted
