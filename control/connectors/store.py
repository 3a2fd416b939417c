"""Per-tenant connector configuration and secrets in the control plane (MongoDB ``metalake_control``).

Two collections, so a read of configuration can never carry a secret by accident:

- ``connectors``: ``{_id: "<tenant>/<name>", tenant, name, type, config, transforms, errors_tolerance, tasks_max,
  state, error, updated_at}``; ``config`` is the plugin's configuration without its secret fields;
- ``connector_tasks``: one document per task of a source connector, ``{_id: "<tenant>/<name>/<task id>", tenant,
  name, task, config, state, trace, worker_id, last_run, updated_at}``, written by the crawl that runs it; ``config``
  is stored as JSON text (FerretDB refuses nested arrays, and a task config is the plugin's to shape);
- ``connector_secrets``: the webhook signing secrets of a connector (at most two active, for rotation), the secret
  fields of its configuration, and the tenants' ingest write keys (stored as SHA-256 hashes only). Signing secrets
  and configuration secrets are sealed (``metalake.sealing``), each bound to its tenant, connector and field.

Only operations MongoDB and FerretDB both support: single-document writes, no transactions, change streams or TTL.
Secret values enter and leave this module as :class:`pydantic.SecretStr`, so a repr or a log line shows ``**********``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import partial
from typing import Any, NotRequired, TypedDict

from pydantic import SecretStr
from pymongo import ASCENDING, ReturnDocument
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from control.connectors.schedule import SCHEDULE_RUNS, SCHEDULES, Schedule
from control.connectors.transforms import TRANSFORM_SPECS, TransformSpec
from metalake.mongo import Doc, mongo_client, typed_collection
from metalake.sealing import Binding, ResealCount, SealedValue, Sealer, require, sealer_for
from metalake.settings import Settings, load_settings
from tenants.naming import CONTROL_DATABASE, validate_tenant_id

CONNECTORS = "connectors"
SECRETS = "connector_secrets"
TASKS = "connector_tasks"
MAX_WEBHOOK_SECRETS = 2
WRITE_KEY_PREFIX = "mlk"


class ConnectorState(StrEnum):
    """Like Kafka Connect's connector states; a new connector starts RUNNING."""

    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"


class Tolerance(StrEnum):
    """``errors.tolerance``: ``all`` dead-letters a record failing a transform or mapping; ``none`` fails the task."""

    NONE = "none"
    ALL = "all"


@dataclass(frozen=True)
class ConnectorRecord:
    """A configured connector instance, without secrets."""

    tenant: str
    name: str
    type: str
    config: Mapping[str, Any]
    transforms: Sequence[TransformSpec] = ()
    errors_tolerance: Tolerance = Tolerance.ALL
    state: ConnectorState = ConnectorState.RUNNING
    error: str | None = None
    updated_at: datetime | None = None
    secret_fields: Sequence[str] = field(default_factory=tuple)
    tasks_max: int = 1
    # A source connector crawled on its own every interval (control.connectors.schedule); None: on request only.
    schedule: Schedule | None = None

    @property
    def id(self) -> str:
        return connector_id(self.tenant, self.name)


@dataclass(frozen=True)
class TaskRecord:
    """One task of a source connector: its configuration (which partitions it owns), state and last run."""

    tenant: str
    name: str
    id: int
    config: Mapping[str, Any]
    state: ConnectorState = ConnectorState.RUNNING
    trace: str | None = None
    worker_id: str | None = None
    last_run: Mapping[str, Any] | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True)
class SecretInfo:
    """What may be shown about a stored secret: its id, age and end of overlap, never its value."""

    id: str
    created_at: datetime
    # Set on the previous secret by a rotation: it is accepted until then, not until the next rotation.
    expires_at: datetime | None = None


@dataclass(frozen=True)
class WriteKeyInfo:
    """What may be shown about an ingest write key: its id, age and grants, never the key (only its hash is stored).
    ``pii``: the key may take PII tags off and stop them spreading (``control.auth.pii``), set at creation only."""

    key_id: str
    created_at: datetime
    pii: bool = False


@dataclass(frozen=True)
class WriteKeyGrant:
    """What a valid write key may do: send events for ``tenant``, and weaken PII masks if ``pii``."""

    tenant: str
    key_id: str
    pii: bool = False


class ConnectorDoc(TypedDict):
    """A document of ``connectors``: :meth:`ControlStore.put_connector` writes every field, ``state`` and ``error``
    on insert only (``set_state`` changes them)."""

    _id: str
    tenant: str
    name: str
    type: str
    # The plugin's configuration without its secret fields.
    config: dict[str, Any]
    secret_fields: list[str]
    # TransformSpec dumps (JSON mode, by alias).
    transforms: list[dict[str, Any]]
    errors_tolerance: str
    tasks_max: int
    state: str
    error: str | None
    updated_at: datetime
    # Schedule dump; absent on connectors stored before schedules existed, None when unscheduled.
    schedule: NotRequired[dict[str, Any] | None]


class TaskDoc(TypedDict):
    """A document of ``connector_tasks``, written by :meth:`ControlStore.assign_tasks`; the worker that ran the task
    and its last run are added by :meth:`ControlStore.set_task_state`."""

    _id: str
    tenant: str
    name: str
    task: int
    # JSON text: FerretDB refuses nested arrays, and a task config is the plugin's to shape.
    config: str
    state: str
    trace: str | None
    worker_id: NotRequired[str]
    last_run: NotRequired[dict[str, Any]]
    updated_at: datetime


class WebhookSecretDoc(TypedDict):
    """One active webhook signing secret of a connector, newest first in its list."""

    id: str
    # Sealed (a plain string: written before sealing; refused on read, sealed by `metalake secrets reseal`).
    value: SealedValue | str
    created_at: datetime
    # The end of the overlap, set on the previous secret when a newer one is activated; none on the newest.
    expires_at: NotRequired[datetime | None]


class ConnectorSecretsDoc(TypedDict, total=False):
    """A connector's document in ``connector_secrets`` (``_id`` is the connector id). ``put_connector`` writes
    ``config``, ``add_webhook_secret`` writes ``webhook_secrets`` and ``rev``: either may come first. Reads project
    single fields, hence total=False."""

    _id: str
    tenant: str
    name: str
    # The secret fields of the connector's configuration, sealed (plain strings: written before sealing).
    config: dict[str, SealedValue | str]
    webhook_secrets: list[WebhookSecretDoc]
    # Revision of ``webhook_secrets``, the compare-and-set guard of a rotation.
    rev: int


class WriteKeyDoc(TypedDict):
    """An ingest write key's document in ``connector_secrets`` (``_id`` is ``write-key/<key id>``)."""

    _id: str
    tenant: str
    key_id: str
    sha256: str
    created_at: datetime
    # The PII grant (absent on keys created before it existed: no grant).
    pii: NotRequired[bool]
    revoked: NotRequired[bool]
    revoked_at: NotRequired[datetime]


def connector_id(tenant: str, name: str) -> str:
    return f"{tenant}/{name}"


def _utc(value: datetime) -> datetime:
    # FerretDB hands datetimes back naive unless the client asked for tz_aware; they are UTC either way.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _end(entry: WebhookSecretDoc) -> datetime | None:
    end = entry.get("expires_at")
    return _utc(end) if end is not None else None


def usable_webhook_secrets(entries: Sequence[WebhookSecretDoc], now: datetime) -> list[WebhookSecretDoc]:
    """The signing secrets a delivery may be signed with at ``now``: the newest, and a previous one until the end
    of its overlap (an expired one stays stored until the next rotation or revocation, but verifies nothing)."""
    return [e for e in entries if (end := e.get("expires_at")) is None or _utc(end) > now]


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


def task_doc_id(tenant: str, name: str, task: int) -> str:
    return f"{tenant}/{name}/{task}"


def _now() -> datetime:
    return datetime.now(UTC)


def _sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _record(doc: ConnectorDoc) -> ConnectorRecord:
    return ConnectorRecord(
        tenant=doc["tenant"],
        name=doc["name"],
        type=doc["type"],
        config=dict(doc.get("config") or {}),
        transforms=tuple(TRANSFORM_SPECS.validate_python(doc.get("transforms") or [])),
        errors_tolerance=Tolerance(doc.get("errors_tolerance", Tolerance.ALL)),
        state=ConnectorState(doc.get("state", ConnectorState.RUNNING)),
        error=doc.get("error"),
        updated_at=doc.get("updated_at"),
        secret_fields=tuple(doc.get("secret_fields") or ()),
        tasks_max=int(doc.get("tasks_max") or 1),
        schedule=Schedule.model_validate(doc["schedule"]) if doc.get("schedule") else None,
    )


def _config_text(config: Mapping[str, Any]) -> str:
    return json.dumps(dict(config), sort_keys=True, separators=(",", ":"))


def _task(doc: TaskDoc) -> TaskRecord:
    return TaskRecord(
        tenant=doc["tenant"],
        name=doc["name"],
        id=int(doc["task"]),
        config=json.loads(doc.get("config") or "{}"),
        state=ConnectorState(doc.get("state", ConnectorState.RUNNING)),
        trace=doc.get("trace"),
        worker_id=doc.get("worker_id"),
        last_run=doc.get("last_run"),
        updated_at=doc.get("updated_at"),
    )


def parse_write_key(key: str) -> tuple[str, str] | None:
    """``(key_id, secret)`` of a key shaped ``mlk_<key id>_<secret>``, or ``None``."""
    parts = key.split("_", 2)
    if len(parts) != 3 or parts[0] != WRITE_KEY_PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


class ControlStore:
    """Typed access to connector configuration, state and secrets. Thread-safe (pymongo clients are)."""

    def __init__(self, database: Database[Doc], sealer: Sealer | None = None) -> None:
        """``sealer``: the keys secrets are sealed with; by default the process's (``sealer_for(load_settings())``),
        resolved at the first secret written or read, so a process that never touches one needs no key."""
        self._sealer = sealer
        self._connectors: Collection[ConnectorDoc] = typed_collection(database, CONNECTORS, ConnectorDoc)
        # One collection, two kinds of document: a connector's secrets and the tenants' write keys (by _id prefix).
        self._secrets: Collection[ConnectorSecretsDoc] = typed_collection(database, SECRETS, ConnectorSecretsDoc)
        self._write_keys: Collection[WriteKeyDoc] = typed_collection(database, SECRETS, WriteKeyDoc)
        self._tasks: Collection[TaskDoc] = typed_collection(database, TASKS, TaskDoc)
        self._schedules: Collection[Doc] = database[SCHEDULES]
        self._schedule_runs: Collection[Doc] = database[SCHEDULE_RUNS]

    @classmethod
    def connect(cls, settings: Settings) -> ControlStore:
        client = mongo_client(settings)
        return cls(client[CONTROL_DATABASE], sealer_for(settings))

    def _keys(self) -> Sealer:
        if self._sealer is None:
            self._sealer = require(sealer_for(load_settings()))
        return self._sealer

    # -- configuration and state ------------------------------------------------------------------------------------

    def put_connector(  # noqa: PLR0913
        self,
        tenant: str,
        name: str,
        type_: str,
        config: Mapping[str, Any],
        *,
        config_secrets: Mapping[str, SecretStr] | None = None,
        transforms: Sequence[TransformSpec] = (),
        errors_tolerance: Tolerance = Tolerance.ALL,
        tasks_max: int = 1,
        schedule: Schedule | None = None,
    ) -> tuple[ConnectorRecord, bool]:
        """Create or replace a connector's configuration; return it and whether it was created.

        ``config`` must already be validated against the plugin's model and hold no secret field; those come in
        ``config_secrets`` and are written to the secrets collection. The state of an existing connector is kept.
        """
        validate_tenant_id(tenant)
        secret_values = dict(config_secrets or {})
        doc_id = connector_id(tenant, name)
        # Sealed before anything is written: without a key nothing is stored.
        keys = self._keys() if secret_values else None
        sealed: dict[str, SealedValue | str] = {
            k: require(keys).seal(v.get_secret_value(), config_binding(tenant, name, k))
            for k, v in secret_values.items()
        }
        before = self._connectors.find_one_and_update(
            {"_id": doc_id},
            {
                "$set": {
                    "tenant": tenant,
                    "name": name,
                    "type": type_,
                    "config": dict(config),
                    "secret_fields": sorted(secret_values),
                    "transforms": [t.model_dump(mode="json", by_alias=True) for t in transforms],
                    "errors_tolerance": errors_tolerance.value,
                    "tasks_max": tasks_max,
                    "schedule": schedule.model_dump(mode="json") if schedule is not None else None,
                    "updated_at": _now(),
                },
                "$setOnInsert": {"state": ConnectorState.RUNNING.value, "error": None},
            },
            upsert=True,
            return_document=ReturnDocument.BEFORE,
        )
        self._secrets.update_one(
            {"_id": doc_id},
            {
                "$set": {
                    "tenant": tenant,
                    "name": name,
                    "config": sealed,
                }
            },
            upsert=True,
        )
        record = self.get_connector(tenant, name)
        if record is None:  # deleted concurrently between the two writes
            raise LookupError(f"connector {doc_id} disappeared while it was written")
        return record, before is None

    def get_connector(self, tenant: str, name: str) -> ConnectorRecord | None:
        doc = self._connectors.find_one({"_id": connector_id(tenant, name)})
        return _record(doc) if doc is not None else None

    def list_connectors(self, tenant: str | None = None) -> list[ConnectorRecord]:
        query: Doc = {} if tenant is None else {"tenant": tenant}
        return [_record(d) for d in self._connectors.find(query).sort("_id", ASCENDING)]

    def scheduled_connectors(self) -> list[ConnectorRecord]:
        """Every tenant's RUNNING connectors that have a schedule, by id."""
        query: Doc = {"schedule.interval_s": {"$exists": True}, "state": ConnectorState.RUNNING.value}
        return [_record(d) for d in self._connectors.find(query).sort("_id", ASCENDING)]

    def connectors_of_type(self, tenant: str, type_: str) -> list[ConnectorRecord]:
        return [_record(d) for d in self._connectors.find({"tenant": tenant, "type": type_}).sort("_id", ASCENDING)]

    def set_state(self, tenant: str, name: str, state: ConnectorState, error: str | None = None) -> bool:
        """Set the state (and the error, cleared unless FAILED); ``False`` if there is no such connector."""
        result = self._connectors.update_one(
            {"_id": connector_id(tenant, name)},
            {
                "$set": {
                    "state": state.value,
                    "error": error if state is ConnectorState.FAILED else None,
                    "updated_at": _now(),
                }
            },
        )
        return result.matched_count == 1

    def delete_connector(self, tenant: str, name: str) -> bool:
        doc_id = connector_id(tenant, name)
        self._secrets.delete_one({"_id": doc_id})
        self._schedules.delete_one({"_id": doc_id})
        self._schedule_runs.delete_many({"connector": doc_id})
        for task in self.get_tasks(tenant, name):
            self._tasks.delete_one({"_id": task_doc_id(tenant, name, task.id)})
        return self._connectors.delete_one({"_id": doc_id}).deleted_count == 1

    # -- tasks (source connectors) ----------------------------------------------------------------------------------

    def get_tasks(self, tenant: str, name: str) -> list[TaskRecord]:
        """The connector's tasks, by id (empty before its first crawl)."""
        return [_task(d) for d in self._tasks.find({"tenant": tenant, "name": name}).sort("task", ASCENDING)]

    def assign_tasks(self, tenant: str, name: str, configs: Sequence[Mapping[str, Any]]) -> list[TaskRecord]:
        """Record a split: task ``i`` gets ``configs[i]``; tasks beyond ``len(configs)`` are removed.

        Like Connect on reconfiguration, a task whose configuration changed starts afresh (RUNNING, no trace); one
        whose configuration is unchanged keeps its state, so a FAILED task stays FAILED until it is restarted.
        One single-document write per task (no transactions on FerretDB).
        """
        before = {t.id: t for t in self.get_tasks(tenant, name)}
        for task_id, config in enumerate(configs):
            doc_id = task_doc_id(tenant, name, task_id)
            previous = before.get(task_id)
            if previous is not None and _config_text(previous.config) == _config_text(config):
                continue
            self._tasks.update_one(
                {"_id": doc_id},
                {
                    "$set": {
                        "tenant": tenant,
                        "name": name,
                        "task": task_id,
                        "config": _config_text(config),
                        "state": ConnectorState.RUNNING.value,
                        "trace": None,
                        "updated_at": _now(),
                    }
                },
                upsert=True,
            )
        for task_id in sorted(before):
            if task_id >= len(configs):
                self._tasks.delete_one({"_id": task_doc_id(tenant, name, task_id)})
        return self.get_tasks(tenant, name)

    def set_task_state(  # noqa: PLR0913
        self,
        tenant: str,
        name: str,
        task: int,
        state: ConnectorState,
        *,
        trace: str | None = None,
        worker_id: str | None = None,
        last_run: Mapping[str, Any] | None = None,
    ) -> bool:
        """Set a task's state (the trace is cleared unless FAILED); ``False`` if there is no such task."""
        fields: Doc = {
            "state": state.value,
            "trace": trace if state is ConnectorState.FAILED else None,
            "updated_at": _now(),
        }
        if worker_id is not None:
            fields["worker_id"] = worker_id
        if last_run is not None:
            fields["last_run"] = dict(last_run)
        result = self._tasks.update_one({"_id": task_doc_id(tenant, name, task)}, {"$set": fields})
        return result.matched_count == 1

    # -- secrets -----------------------------------------------------------------------------------------------------

    def _open_config(self, tenant: str, name: str, doc: ConnectorSecretsDoc) -> dict[str, SecretStr]:
        values = doc.get("config") or {}
        if not values:
            return {}
        keys = self._keys()
        return {k: keys.open(v, config_binding(tenant, name, k)) for k, v in values.items()}

    def _open_webhook(self, tenant: str, name: str, doc: ConnectorSecretsDoc) -> list[SecretStr]:
        entries = usable_webhook_secrets(doc.get("webhook_secrets") or [], _now())
        if not entries:
            return []
        keys = self._keys()
        return [keys.open(s["value"], webhook_binding(tenant, name, s["id"])) for s in entries]

    def config_secrets(self, tenant: str, name: str) -> dict[str, SecretStr]:
        """The secret configuration fields; :class:`~metalake.sealing.SealingError` if one does not open."""
        doc = self._secrets.find_one({"_id": connector_id(tenant, name)}, {"config": 1})
        return self._open_config(tenant, name, doc or {})

    def add_webhook_secret(
        self, tenant: str, name: str, secret: SecretStr, overlap: timedelta = timedelta(0)
    ) -> list[SecretInfo]:
        """Make ``secret`` the newest; the newest before it stays valid for ``overlap`` (rotation; none: retired at
        once), older ones are retired. Returns the active secrets, newest first."""
        secret_id = secrets.token_hex(4)
        sealed = self._keys().seal(secret.get_secret_value(), webhook_binding(tenant, name, secret_id))
        now = _now()
        entry: WebhookSecretDoc = {"id": secret_id, "value": sealed, "created_at": now, "expires_at": None}

        def rotated(entries: list[WebhookSecretDoc]) -> list[WebhookSecretDoc]:
            return rotated_webhook_secrets(entries, entry, now, overlap)

        return self._change_webhook_secrets(tenant, name, rotated, create=True)

    def revoke_webhook_secret(self, tenant: str, name: str, secret_id: str) -> list[SecretInfo] | None:
        """Retire the signing secret ``secret_id`` now (a leaked previous secret need not wait for its overlap to
        end); the active secrets left, or ``None`` if the connector has no such secret."""
        found = False

        def without(entries: list[WebhookSecretDoc]) -> list[WebhookSecretDoc]:
            nonlocal found
            found = any(e["id"] == secret_id for e in entries)
            return [e for e in entries if e["id"] != secret_id]

        active = self._change_webhook_secrets(tenant, name, without, create=False)
        return active if found else None

    def _change_webhook_secrets(
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
                return self.webhook_secret_info(tenant, name)
        raise RuntimeError(f"webhook secrets of {doc_id} changed concurrently five times; try again")

    def webhook_secret_info(self, tenant: str, name: str) -> list[SecretInfo]:
        """The secrets a delivery may be signed with now, newest first (an expired previous one is not listed)."""
        doc = self._secrets.find_one({"_id": connector_id(tenant, name)}, {"webhook_secrets": 1})
        entries = usable_webhook_secrets((doc or {}).get("webhook_secrets") or [], _now())
        return [SecretInfo(s["id"], _utc(s["created_at"]), _end(s)) for s in entries]

    def secrets_of(self, tenant: str, name: str) -> tuple[list[SecretStr], dict[str, SecretStr]]:
        """The active webhook signing secrets (newest first) and the secret configuration fields, in one read."""
        doc = self._secrets.find_one({"_id": connector_id(tenant, name)}) or {}
        return self._open_webhook(tenant, name, doc), self._open_config(tenant, name, doc)

    def webhook_secrets(self, tenant: str, name: str) -> list[SecretStr]:
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

    def create_write_key(self, tenant: str, *, pii: bool = False) -> tuple[WriteKeyInfo, SecretStr]:
        """A new ingest write key for ``tenant``: its id, age and grant, and the key. Only its SHA-256 is stored: show
        the key once. ``pii`` lets it weaken PII masks (a tenant administrator's decision, fixed for the key's life:
        to change it, create another key and revoke this one)."""
        validate_tenant_id(tenant)
        info = WriteKeyInfo(key_id=secrets.token_hex(8), created_at=_now(), pii=pii)
        secret = secrets.token_urlsafe(32)
        self._write_keys.insert_one(
            {
                "_id": f"write-key/{info.key_id}",
                "tenant": tenant,
                "key_id": info.key_id,
                "sha256": _sha256(secret),
                "created_at": info.created_at,
                "pii": pii,
            }
        )
        return info, SecretStr(f"{WRITE_KEY_PREFIX}_{info.key_id}_{secret}")

    def check_write_key(self, key: SecretStr) -> WriteKeyGrant | None:
        """What a write key may do, or ``None`` if it is not a valid key. The secret part is compared in constant
        time."""
        parsed = parse_write_key(key.get_secret_value())
        if parsed is None:
            return None
        key_id, secret = parsed
        doc = self._write_keys.find_one({"_id": f"write-key/{key_id}"})
        if doc is None or doc.get("revoked"):
            return None
        if not hmac.compare_digest(_sha256(secret), str(doc.get("sha256", ""))):
            return None
        return WriteKeyGrant(tenant=doc["tenant"], key_id=key_id, pii=doc.get("pii") is True)

    def tenant_for_write_key(self, key: SecretStr) -> str | None:
        """The tenant a write key belongs to, or ``None`` (:meth:`check_write_key`)."""
        grant = self.check_write_key(key)
        return grant.tenant if grant is not None else None

    def write_keys(self, tenant: str) -> list[WriteKeyInfo]:
        """The tenant's write keys that are not revoked, oldest first."""
        docs = self._write_keys.find({"tenant": tenant, "key_id": {"$exists": True}, "revoked": {"$ne": True}})
        keys = [WriteKeyInfo(key_id=d["key_id"], created_at=d["created_at"], pii=d.get("pii") is True) for d in docs]
        return sorted(keys, key=lambda k: (k.created_at, k.key_id))

    def revoke_write_key(self, tenant: str, key_id: str) -> bool:
        """Revoke one of the tenant's write keys (at once: the ingest API reads the store on every request); False
        if the tenant has no key of that id. Revoking a revoked key again is a success."""
        result = self._write_keys.update_one(
            {"_id": f"write-key/{key_id}", "tenant": tenant}, {"$set": {"revoked": True, "revoked_at": _now()}}
        )
        return result.matched_count == 1
