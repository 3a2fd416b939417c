"""GDPR erasures requested through the API: a status document per request in the control plane, and the run, which
is ``python -m processors.lake erase`` in a subprocess (the API never loads Spark).

``erasures`` documents: ``{_id: "<tenant>/<id>", tenant, id, target_hash, include_children, state, requested_by,
created_at, updated_at, counts: [{name, n}], error}``. The URN itself is never stored: only its sha256 (the hash the
erase command records in the tenant's audit table), so the status of an erasure does not keep what was erased.
"""

from __future__ import annotations

import json
import logging
import secrets
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NotRequired, TypedDict

from pymongo import ReturnDocument
from pymongo.collection import Collection
from pymongo.database import Database

from metalake.mongo import Doc, typed_collection

log = logging.getLogger(__name__)

ERASURES_COLLECTION = "erasures"

ERASE_ID_NAMESPACE = uuid.UUID("6f1d5c3e-8a0b-5f4e-9c2d-7b6a5e4d3c2b")
# (argv) -> (exit code, stdout, stderr tail)
EraseRunner = Callable[[Sequence[str]], tuple[int, str, str]]


class ErasureState(StrEnum):
    ACCEPTED = "accepted"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class ErasureRecord:
    tenant: str
    id: str
    target_hash: str
    include_children: bool
    state: ErasureState
    requested_by: str
    created_at: datetime
    updated_at: datetime
    counts: Mapping[str, int] = field(default_factory=dict)
    error: str | None = None
    # Done, but an operator still has something to do (the erase's own fixed words, never a value).
    action_required: str | None = None


class ErasureCountDoc(TypedDict):
    """Rows or documents one table or collection lost (a list entry: the names hold '.', which FerretDB refuses in
    field names)."""

    name: str
    n: int


class ErasureDoc(TypedDict):
    """A document of ``erasures``, as :meth:`ErasureStore.create` inserts it; ``action_required`` comes with the
    first :meth:`ErasureStore.update`."""

    _id: str  # "<tenant>/<id>"
    tenant: str
    id: str
    # sha256 of the erased URN; the URN itself is never stored.
    target_hash: str
    include_children: bool
    state: str
    requested_by: str
    created_at: datetime
    updated_at: datetime
    counts: list[ErasureCountDoc]
    error: str | None
    action_required: NotRequired[str | None]


def _record(doc: ErasureDoc) -> ErasureRecord:
    return ErasureRecord(
        tenant=doc["tenant"],
        id=doc["id"],
        target_hash=doc["target_hash"],
        include_children=bool(doc.get("include_children")),
        state=ErasureState(doc["state"]),
        requested_by=doc["requested_by"],
        created_at=doc["created_at"],
        updated_at=doc["updated_at"],
        counts={str(c["name"]): int(c["n"]) for c in doc.get("counts") or []},
        error=doc.get("error"),
        action_required=doc.get("action_required"),
    )


class ErasureStore:
    def __init__(self, database: Database[Doc]) -> None:
        self._erasures: Collection[ErasureDoc] = typed_collection(database, ERASURES_COLLECTION, ErasureDoc)

    def create(self, tenant: str, target_hash: str, include_children: bool, requested_by: str) -> ErasureRecord:
        now = datetime.now(UTC)
        erasure_id = f"era_{secrets.token_hex(12)}"
        doc: ErasureDoc = {
            "_id": f"{tenant}/{erasure_id}",
            "tenant": tenant,
            "id": erasure_id,
            "target_hash": target_hash,
            "include_children": include_children,
            "state": ErasureState.ACCEPTED.value,
            "requested_by": requested_by,
            "created_at": now,
            "updated_at": now,
            "counts": [],
            "error": None,
        }
        self._erasures.insert_one(doc)
        return _record(doc)

    def get(self, tenant: str, erasure_id: str) -> ErasureRecord | None:
        doc = self._erasures.find_one({"_id": f"{tenant}/{erasure_id}"})
        return _record(doc) if doc is not None else None

    def unfinished(self) -> list[ErasureRecord]:
        """Every erasure still accepted or running, of every tenant."""
        unfinished = [ErasureState.ACCEPTED.value, ErasureState.RUNNING.value]
        return [_record(doc) for doc in self._erasures.find({"state": {"$in": unfinished}})]

    def update(
        self,
        tenant: str,
        erasure_id: str,
        state: ErasureState,
        *,
        counts: Mapping[str, int] | None = None,
        error: str | None = None,
        action_required: str | None = None,
    ) -> ErasureRecord | None:
        changes: Doc = {
            "state": state.value,
            "updated_at": datetime.now(UTC),
            "error": error,
            "action_required": action_required,
        }
        if counts is not None:
            # A list, not an object: the names hold '.', which FerretDB refuses in field names.
            changes["counts"] = [{"name": name, "n": n} for name, n in sorted(counts.items())]
        doc = self._erasures.find_one_and_update(
            {"_id": f"{tenant}/{erasure_id}"}, {"$set": changes}, return_document=ReturnDocument.AFTER
        )
        return _record(doc) if doc is not None else None


def run_erase_subprocess(argv: Sequence[str]) -> tuple[int, str, str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout, (done.stderr or "")[-2000:]


def _counts(report: Mapping[str, Any]) -> dict[str, int]:
    """Rows and documents removed, per table and collection: the numbers of the erase report, nothing else."""
    out: dict[str, int] = {}
    for group in ("delta_rows", "mongo_documents"):
        for name, value in (report.get(group) or {}).items():
            if isinstance(value, int):
                out[f"{group.split('_')[0]}.{name}"] = value
    return out


def run_erasure(
    store: ErasureStore,
    tenant: str,
    erasure_id: str,
    urn: str,
    actor: str,
    include_children: bool,
    runner: EraseRunner = run_erase_subprocess,
) -> ErasureRecord | None:
    """Run the erase and record its outcome on the erasure document. Exit code 2 is a refused request (no lake
    folder for the tenant, a non-canonical URN); its one ``error:`` line names no value."""
    store.update(tenant, erasure_id, ErasureState.RUNNING)
    argv = [
        sys.executable,
        "-m",
        "processors.lake",
        "erase",
        "--yes",  # the erasure request is the confirmation
        "--tenant",
        tenant,
        "--urn",
        urn,
        "--actor",
        actor,
        # The erase's announcement takes a UUID: one derived from ours, so a resumed erasure announces the same id.
        "--erasure-id",
        str(uuid.uuid5(ERASE_ID_NAMESPACE, f"{tenant}/{erasure_id}")),
        *(["--include-children"] if include_children else []),
    ]
    code, stdout, _stderr = runner(argv)  # its lines may quote the URN: not kept
    if code == 0:
        try:
            report = json.loads(stdout)
        except ValueError:
            report = {}
        action = report.get("action_required")
        return store.update(
            tenant,
            erasure_id,
            ErasureState.DONE,
            counts=_counts(report),
            action_required=action if isinstance(action, str) else None,
        )
    # The command's own error line may quote the URN (e.g. "did you mean ..."): keep only the kind of failure.
    reason = "refused by the erase command (unknown tenant lake or invalid URN)" if code == 2 else f"exit code {code}"
    log.warning("api.erasure_failed", extra={"tenant": tenant, "erasure": erasure_id, "code": code})
    return store.update(tenant, erasure_id, ErasureState.FAILED, error=reason)
