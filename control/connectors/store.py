"""Per-tenant connector configuration and state in the control plane (MongoDB ``metalake_control``), with the
stores of what hangs off a connector, one module each:

- ``connectors`` (here): ``{_id: "<tenant>/<name>", tenant, name, type, config, transforms, errors_tolerance,
  tasks_max, state, error, updated_at}``; ``config`` is the plugin's configuration without its secret fields;
- ``connector_tasks`` (``tasks.py``): one document per task of a source connector;
- ``connector_secrets`` (``secrets.py``): the connector's webhook signing secrets and the secret fields of its
  configuration, sealed, apart so a read of configuration can never carry a secret by accident; and the tenants'
  ingest write keys (``write_keys.py``, SHA-256 hashes only).

:class:`ControlStore` is the one way in: ``store.tasks``, ``store.secrets`` and ``store.write_keys`` are its parts.
The records callers see are in ``records.py``. Only operations MongoDB and FerretDB both support: single-document
writes, no transactions, change streams or TTL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NotRequired, TypedDict

from pydantic import SecretStr
from pymongo import ASCENDING, ReturnDocument
from pymongo.collection import Collection
from pymongo.database import Database

from control.connectors.records import ConnectorRecord, ConnectorState, Tolerance, connector_id, utc_now
from control.connectors.schedule import SCHEDULE_RUNS, SCHEDULES, Schedule
from control.connectors.secrets import ConnectorSecrets
from control.connectors.tasks import ConnectorTasks
from control.connectors.transforms import TRANSFORM_SPECS, TransformSpec
from control.connectors.write_keys import WriteKeys
from metalake.mongo import Doc, typed_collection
from metalake.sealing import Sealer, require
from tenants.naming import validate_tenant_id

CONNECTORS = "connectors"


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


class ControlStore:
    """Typed access to connector configuration and state, and through its parts to each connector's tasks and
    secrets and the tenants' write keys. Thread-safe (pymongo clients are)."""

    def __init__(self, database: Database[Doc], sealer: Sealer | None = None) -> None:
        """``sealer``: the keys secrets are sealed with (the process's, ``metalake.sealing.sealer_for``, built by its
        entry point); ``None``: no key, and only a secret written or read fails, so a process that touches none needs
        no key."""
        self._sealer = sealer
        self._connectors: Collection[ConnectorDoc] = typed_collection(database, CONNECTORS, ConnectorDoc)
        self._schedules: Collection[Doc] = database[SCHEDULES]
        self._schedule_runs: Collection[Doc] = database[SCHEDULE_RUNS]
        self.tasks = ConnectorTasks(database)
        self.secrets = ConnectorSecrets(database, self._keys)
        self.write_keys = WriteKeys(database)

    def _keys(self) -> Sealer:
        return require(self._sealer)

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
        sealed = self.secrets.seal_config(tenant, name, secret_values)
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
                    "updated_at": utc_now(),
                },
                "$setOnInsert": {"state": ConnectorState.RUNNING.value, "error": None},
            },
            upsert=True,
            return_document=ReturnDocument.BEFORE,
        )
        self.secrets.put_config(tenant, name, sealed)
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
                    "updated_at": utc_now(),
                }
            },
        )
        return result.matched_count == 1

    def delete_connector(self, tenant: str, name: str) -> bool:
        doc_id = connector_id(tenant, name)
        self.secrets.delete(tenant, name)
        self._schedules.delete_one({"_id": doc_id})
        self._schedule_runs.delete_many({"connector": doc_id})
        self.tasks.delete(tenant, name)
        return self._connectors.delete_one({"_id": doc_id}).deleted_count == 1
