"""The tasks of source connectors in MongoDB ``metalake_control.connector_tasks``: one document per task, ``{_id:
"<tenant>/<name>/<task id>", tenant, name, task, config, state, trace, worker_id, last_run, updated_at}``, written by
the crawl that runs it; ``config`` is stored as JSON text (FerretDB refuses nested arrays, and a task config is the
plugin's to shape). Single-document writes only (no transactions on FerretDB)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NotRequired, TypedDict

from pymongo import ASCENDING
from pymongo.collection import Collection
from pymongo.database import Database

from control.connectors.records import ConnectorState, TaskRecord, task_doc_id, utc_now
from metalake.mongo import Doc, typed_collection

TASKS = "connector_tasks"


class TaskDoc(TypedDict):
    """A document of ``connector_tasks``, written by :meth:`ConnectorTasks.assign`; the worker that ran the task
    and its last run are added by :meth:`ConnectorTasks.set_state`."""

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


class ConnectorTasks:
    """The tasks of each source connector: the split the crawl records, and each task's state and last run."""

    def __init__(self, database: Database[Doc]) -> None:
        self._tasks: Collection[TaskDoc] = typed_collection(database, TASKS, TaskDoc)

    def of(self, tenant: str, name: str) -> list[TaskRecord]:
        """The connector's tasks, by id (empty before its first crawl)."""
        return [_task(d) for d in self._tasks.find({"tenant": tenant, "name": name}).sort("task", ASCENDING)]

    def assign(self, tenant: str, name: str, configs: Sequence[Mapping[str, Any]]) -> list[TaskRecord]:
        """Record a split: task ``i`` gets ``configs[i]``; tasks beyond ``len(configs)`` are removed.

        Like Connect on reconfiguration, a task whose configuration changed starts afresh (RUNNING, no trace); one
        whose configuration is unchanged keeps its state, so a FAILED task stays FAILED until it is restarted.
        One single-document write per task (no transactions on FerretDB).
        """
        before = {t.id: t for t in self.of(tenant, name)}
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
                        "updated_at": utc_now(),
                    }
                },
                upsert=True,
            )
        for task_id in sorted(before):
            if task_id >= len(configs):
                self._tasks.delete_one({"_id": task_doc_id(tenant, name, task_id)})
        return self.of(tenant, name)

    def set_state(  # noqa: PLR0913
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
            "updated_at": utc_now(),
        }
        if worker_id is not None:
            fields["worker_id"] = worker_id
        if last_run is not None:
            fields["last_run"] = dict(last_run)
        result = self._tasks.update_one({"_id": task_doc_id(tenant, name, task)}, {"$set": fields})
        return result.matched_count == 1

    def delete(self, tenant: str, name: str) -> None:
        """Remove the connector's tasks (the connector is being deleted)."""
        for task in self.of(tenant, name):
            self._tasks.delete_one({"_id": task_doc_id(tenant, name, task.id)})
