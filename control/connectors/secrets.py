"""A connector's secrets in MongoDB ``metalake_control.connector_secrets``, apart from its configuration so a read of
the configuration can never carry a secret by accident: the webhook signing secrets (at most two active, for
rotation) and the secret fields of its configuration, each sealed (``metalake.sealing``) and bound to its tenant,
connector and field. The same collection holds the tenants' ingest write keys (``write_keys``, hashes only).

Secret values enter and leave this module as :class:`pydantic.SecretStr`, so a repr or a log line shows ``**********``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import NotRequired, TypedDict

from pydantic import SecretStr
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from control.connectors.records import SecretInfo, as_utc, connector_id, utc_now
from metalake.mongo import Doc, typed_collection
from metalake.sealing import Binding, ResealCount, SealedValue, Sealer

SECRETS = "connector_secrets"
MAX_WEBHOOK_SECRETS = 2


class WebhookSecretDoc(TypedDict):
    """One active webhook signing secret of a connector, newest first in its list."""

    id: str
    # Sealed (a plain string: written before sealing; refused on read, sealed by `metalake secrets reseal`).
    value: SealedValue | str
    created_at: datetime
    # The end of the overlap, set on the previous secret when a newer one is activated; none on the newest.
    expires_at: NotRequired[datetime | None]


class ConnectorSecretsDoc(TypedDict, total=False):
    """A connector's document in ``connector_secrets`` (``_id`` is the connector id). ``put_config`` writes
    ``config``, ``add_webhook`` writes ``webhook_secrets`` and ``rev``: either may come first. Reads project
    single fields, hence total=False."""

    _id: str
    tenant: str
    name: str
    # The secret fields of the connector's configuration, sealed (plain strings: written before sealing).
    config: dict[str, SealedValue | str]
    webhook_secrets: list[WebhookSecretDoc]
    # Revision of ``webhook_secrets``, the compare-and-set guard of a rotation.
    rev: int


def _end(entry: WebhookSecretDoc) -> datetime | None:
    end = entry.get("expires_at")
    return as_utc(end) if end is not None else None


def usable_webhook_secrets(entries: Sequence[WebhookSecretDoc], now: datetime) -> list[WebhookSecretDoc]:
    """The signing secrets a delivery may be signed with at ``now``: the newest, and a previous one until the end
    of its overlap (an expired one stays stored until the next rotation or revocation, but verifies nothing)."""
    return [e for e in entries if (end := e.get("expires_at")) is None or as_utc(end) > now]


def rotated_webhook_secrets(
    entries: Sequence[WebhookSecretDoc], newest: WebhookSecretDoc, now: datetime, overlap: timedelta
) -> list[WebhookSecretDoc]:
    """The secrets after ``newest`` is activated at ``now``: the newest usable one before it stays valid for
    ``overlap`` (none: retired at once), older ones are retired. A rotation never extends an overlap already running:
    rotating twice cannot keep a secret alive past the end its first rotation gave it."""
    previous = usable_webhook_secrets(entries, now)[: MAX_WEBHOOK_SECRETS - 1] if overlap > timedelta(0) else []
    kept: list[WebhookSecretDoc] = [
        {**e, "expires_at": min(end, now + overlap) if (end := _end(e)) is not None else now + overlap}
        for e in previous
    ]
    return [newest, *kept]


def config_binding(tenant: str, name: str, field: str) -> Binding:
    """What a connector's secret configuration field is sealed for (another tenant, connector or field: no open)."""
    return Binding(tenant, f"{SECRETS}/{connector_id(tenant, name)}", f"config.{field}")


def webhook_binding(tenant: str, name: str, secret_id: str) -> Binding:
    """What one of a connector's webhook signing secrets is sealed for."""
    return Binding(tenant, f"{SECRETS}/{connector_id(tenant, name)}", f"webhook_secrets.{secret_id}")


class ConnectorSecrets:
    """Each connector's sealed secrets. ``keys`` gives the sealer, called at the first secret sealed or opened (a
    process that never touches one needs no key)."""

    def __init__(self, database: Database[Doc], keys: Callable[[], Sealer]) -> None:
        self._keys = keys
        self._secrets: Collection[ConnectorSecretsDoc] = typed_collection(database, SECRETS, ConnectorSecretsDoc)

    def seal_config(self, tenant: str, name: str, values: Mapping[str, SecretStr]) -> dict[str, SealedValue | str]:
        """The secret configuration fields, sealed for this connector (nothing to seal: no key needed)."""
        if not values:
            return {}
        keys = self._keys()
        return {k: keys.seal(v.get_secret_value(), config_binding(tenant, name, k)) for k, v in values.items()}

    def put_config(self, tenant: str, name: str, sealed: Mapping[str, SealedValue | str]) -> None:
        """Store the connector's sealed configuration secrets (:meth:`seal_config`), replacing the previous ones."""
        self._secrets.update_one(
            {"_id": connector_id(tenant, name)},
            {"$set": {"tenant": tenant, "name": name, "config": dict(sealed)}},
            upsert=True,
        )

    def delete(self, tenant: str, name: str) -> None:
        """Remove every secret of the connector (it is being deleted)."""
        self._secrets.delete_one({"_id": connector_id(tenant, name)})

    def _open_config(self, tenant: str, name: str, doc: ConnectorSecretsDoc) -> dict[str, SecretStr]:
        values = doc.get("config") or {}
        if not values:
            return {}
        keys = self._keys()
        return {k: keys.open(v, config_binding(tenant, name, k)) for k, v in values.items()}

    def _open_webhook(self, tenant: str, name: str, doc: ConnectorSecretsDoc) -> list[SecretStr]:
        entries = usable_webhook_secrets(doc.get("webhook_secrets") or [], utc_now())
        if not entries:
            return []
        keys = self._keys()
        return [keys.open(s["value"], webhook_binding(tenant, name, s["id"])) for s in entries]

    def config(self, tenant: str, name: str) -> dict[str, SecretStr]:
        """The secret configuration fields; :class:`~metalake.sealing.SealingError` if one does not open."""
        doc = self._secrets.find_one({"_id": connector_id(tenant, name)}, {"config": 1})
        return self._open_config(tenant, name, doc or {})

    def add_webhook(
        self, tenant: str, name: str, secret: SecretStr, overlap: timedelta = timedelta(0)
    ) -> list[SecretInfo]:
        """Make ``secret`` the newest; the newest before it stays valid for ``overlap`` (rotation; none: retired at
        once), older ones are retired. Returns the active secrets, newest first."""
        secret_id = secrets.token_hex(4)
        sealed = self._keys().seal(secret.get_secret_value(), webhook_binding(tenant, name, secret_id))
        now = utc_now()
        entry: WebhookSecretDoc = {"id": secret_id, "value": sealed, "created_at": now, "expires_at": None}

        def rotated(entries: list[WebhookSecretDoc]) -> list[WebhookSecretDoc]:
            return rotated_webhook_secrets(entries, entry, now, overlap)

        return self._change_webhook(tenant, name, rotated, create=True)

    def revoke_webhook(self, tenant: str, name: str, secret_id: str) -> list[SecretInfo] | None:
        """Retire the signing secret ``secret_id`` now (a leaked previous secret need not wait for its overlap to
        end); the active secrets left, or ``None`` if the connector has no such secret."""
        found = False

        def without(entries: list[WebhookSecretDoc]) -> list[WebhookSecretDoc]:
            nonlocal found
            found = any(e["id"] == secret_id for e in entries)
            return [e for e in entries if e["id"] != secret_id]

        active = self._change_webhook(tenant, name, without, create=False)
        return active if found else None

    def _change_webhook(
        self,
        tenant: str,
        name: str,
        change: Callable[[list[WebhookSecretDoc]], list[WebhookSecretDoc]],
        *,
        create: bool,
    ) -> list[SecretInfo]:
        doc_id = connector_id(tenant, name)
        # FerretDB ignores $push's $position/$slice, so the list is computed here and written with a revision guard
        # (compare-and-set on one document): two concurrent changes cannot lose one another's secret silently.
        for _ in range(5):
            doc = self._secrets.find_one({"_id": doc_id}, {"webhook_secrets": 1, "rev": 1}) or {}
            if not doc and not create:
                return []
            revision = int(doc.get("rev", 0))
            entries = change(list(doc.get("webhook_secrets") or []))
            try:
                result = self._secrets.update_one(
                    {"_id": doc_id, "rev": revision if "rev" in doc else {"$exists": False}},
                    {"$set": {"tenant": tenant, "name": name, "webhook_secrets": entries, "rev": revision + 1}},
                    upsert=not doc,
                )
            except DuplicateKeyError:
                continue  # created concurrently: read again
            if result.matched_count == 1 or result.upserted_id is not None:
                return self.webhook_info(tenant, name)
        raise RuntimeError(f"webhook secrets of {doc_id} changed concurrently five times; try again")

    def webhook_info(self, tenant: str, name: str) -> list[SecretInfo]:
        """The secrets a delivery may be signed with now, newest first (an expired previous one is not listed)."""
        doc = self._secrets.find_one({"_id": connector_id(tenant, name)}, {"webhook_secrets": 1})
        entries = usable_webhook_secrets((doc or {}).get("webhook_secrets") or [], utc_now())
        return [SecretInfo(s["id"], as_utc(s["created_at"]), _end(s)) for s in entries]

    def of(self, tenant: str, name: str) -> tuple[list[SecretStr], dict[str, SecretStr]]:
        """The active webhook signing secrets (newest first) and the secret configuration fields, in one read."""
        doc = self._secrets.find_one({"_id": connector_id(tenant, name)}) or {}
        return self._open_webhook(tenant, name, doc), self._open_config(tenant, name, doc)

    def webhook(self, tenant: str, name: str) -> list[SecretStr]:
        """The active signing secrets, newest first (empty: the connector must refuse every delivery)."""
        doc = self._secrets.find_one({"_id": connector_id(tenant, name)}, {"webhook_secrets": 1})
        return self._open_webhook(tenant, name, doc or {})

    def reseal(self, tenant: str | None = None) -> ResealCount:
        """Every connector's (of ``tenant``, or all) signing and configuration secrets sealed under the current key,
        plain ones too. Each part is rewritten only if unchanged since it was read (the signing secrets under their
        revision), so a concurrent rotation or configuration change is never undone. Write keys are hashes: nothing
        to seal."""
        keys, count = self._keys(), ResealCount()
        for doc in self._secrets.find({} if tenant is None else {"tenant": tenant}):
            owner, name = doc.get("tenant"), doc.get("name")
            if owner is None or name is None or doc["_id"].startswith("write-key/"):
                continue  # a write key's document: a hash, nothing sealed
            what = f"{SECRETS}/{doc['_id']}"
            config = dict(doc.get("config") or {})
            resealed = count.each(keys, config, partial(config_binding, owner, name))
            if resealed is not None:
                done = self._secrets.update_one({"_id": doc["_id"], "config": config}, {"$set": {"config": resealed}})
                count.written(done.matched_count == 1, what)
            entries = list(doc.get("webhook_secrets") or [])
            by_id = {e["id"]: e["value"] for e in entries}
            rewrapped = count.each(keys, by_id, partial(webhook_binding, owner, name))
            if rewrapped is not None:
                revision = int(doc.get("rev", 0))
                updated = [{**e, "value": rewrapped[e["id"]]} for e in entries]
                done = self._secrets.update_one(
                    {"_id": doc["_id"], "rev": revision if "rev" in doc else {"$exists": False}},
                    {"$set": {"webhook_secrets": updated, "rev": revision + 1}},
                )
                count.written(done.matched_count == 1, what)
        return count
