"""The MongoDB projection of current asset state: version-guarded upserts, so stale or repeated events are no-ops.

Only operations real MongoDB and FerretDB both have: no transactions, no change streams, no TTL indexes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pymongo.collection import Collection
from pymongo.errors import OperationFailure

from catalog import urn_keys
from catalog.projection import escape_keys
from processors.enrichment.health import INSERT_DEFAULTS
from processors.enrichment.state import ASSETS, StateSpec

DUPLICATE_KEY = 11000
# Operations per step of apply_upserts: one ``insert`` command carries this many documents.
UPDATE_CHUNK = 50
# The share of new documents in a chunk from which the next chunk is inserted first (see insert_first_next): the
# measured medians break even at about 40 %; half leaves a margin for their noise.
INSERT_FIRST_SHARE = 0.5

# Every ``update`` statement goes in a command of its own. FerretDB 1.24 keeps, until the command ends, a backend
# connection for each statement that matched a document (the PostgreSQL pool has 50; SQLite hung at 100): a command
# with that many matching statements, or several concurrent commands adding up to it, never answers and leaves
# FerretDB wedged for every client. FerretDB also reports a failed statement as index 0 with no count, so within a
# multi-statement command it cannot say which statement was stale. One statement per command costs a round trip on
# loopback, small beside the statement itself (measured in docs/benchmarks.md).


def guarded_upsert(doc_id: str, version: int, event_id: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """An ``update`` statement that sets ``fields`` only if (version, event_id) is newer than the document's.

    When the document is newer, the filter matches nothing and the upsert's insert hits the unique ``_id``:
    that duplicate-key error is the "stale, skip" signal.
    """
    newer = {
        "$or": [
            {"version": {"$lt": version}},
            {"version": version, "event_id": {"$lt": event_id}},
        ]
    }
    doc = {**fields, "version": version, "event_id": event_id}
    return {"q": {"_id": doc_id, **newer}, "u": {"$set": doc}, "upsert": True}


def spec_upsert(spec: StateSpec) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """The guarded upsert of one folded state row, with the same field semantics as the Delta MERGE: carried
    fields are set only when present; a removal (tombstone) sets the key, ``deleted`` and the meta columns only."""

    def build(row: Mapping[str, Any]) -> dict[str, Any]:
        fields: dict[str, Any] = {k: row[k] for k in spec.key}
        if spec.urn_keys:
            fields[urn_keys.FIELD] = urn_keys.urn_keys(str(row["urn"]))  # a tombstone's too: it is a key field
        fields.update({"deleted": row["deleted"], "event_time": row["event_time"], "updated_at": row["updated_at"]})
        if not row["deleted"]:
            fields.update({c: row[c] for c in spec.fields if c not in spec.carried})
        fields.update({c: row[c] for c in spec.carried if row[c] is not None})
        if fields.get("properties"):
            fields["properties"] = escape_keys(dict(fields["properties"]))
        op = guarded_upsert(spec.mongo_id(row), row["version"], row["event_id"], fields)
        if spec is ASSETS:
            # A new asset starts healthy (no incident seen); the job sets the computed health after this upsert.
            op["u"]["$setOnInsert"] = dict(INSERT_DEFAULTS)
        if spec.protect_human and row.get("source") == "auto" and not row["deleted"]:
            # Same rule as the Delta MERGE: an automatic row never replaces a person's decision.
            op["q"]["source"] = {"$ne": "human"}
        return op

    return build


def _inserted_document(op: Mapping[str, Any]) -> dict[str, Any]:
    """The document the guarded upsert would create: its ``_id``, the insert defaults, then the fields."""
    return {"_id": op["q"]["_id"], **op["u"].get("$setOnInsert", {}), **op["u"]["$set"]}


def first_per_id(ops: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    """Split the positions of ``ops`` into the first operation on each ``_id`` and the later ones (in order)."""
    seen: set[Any] = set()
    first: list[int] = []
    later: list[int] = []
    for i, op in enumerate(ops):
        doc_id = op["q"]["_id"]
        (later if doc_id in seen else first).append(i)
        seen.add(doc_id)
    return first, later


def _write_errors(reply: Mapping[str, Any], command: str) -> list[int]:
    """The indexes of the statements that hit a duplicate key; raises on any other write error."""
    duplicates = []
    for error in reply.get("writeErrors", []):
        if error.get("code") != DUPLICATE_KEY:
            raise OperationFailure(f"MongoDB {command} failed: {error.get('errmsg')}", error.get("code"), reply)
        duplicates.append(int(error["index"]))
    return duplicates


def _insert_new(collection: Collection[dict[str, Any]], ops: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
    """Insert the documents of upserts whose ``_id`` is new to the collection; return (inserted, held): the upserts
    whose ``_id`` was already there, in order, for the version guard to decide.

    An insert finds a held ``_id`` by the unique index and costs a fraction of a guarded upsert that creates the
    document (which first runs its query), so a batch of new documents is one cheap command. Unordered: the reply
    lists every duplicate key, where an ordered insert would stop at the first. Only one operation per ``_id`` is
    inserted, so the order in which the server takes the documents cannot matter.
    """
    first, later = first_per_id(ops)
    documents = [_inserted_document(ops[i]) for i in first]
    reply = collection.database.command({"insert": collection.name, "documents": documents, "ordered": False})
    duplicates = {first[i] for i in _write_errors(reply, "insert")}
    held = sorted(duplicates | set(later))
    return len(first) - len(duplicates), [ops[i] for i in held]


def _update_one(collection: Collection[dict[str, Any]], op: dict[str, Any]) -> dict[str, Any]:
    """Send one ``update`` statement alone (see the note at the top); return the reply."""
    return collection.database.command({"update": collection.name, "updates": [op], "ordered": True})


def insert_first_next(created: int, total: int) -> bool:
    """Whether the next chunk should go insert-first, given how many of this chunk's ``total`` operations created a
    document. Inserting first costs one cheap command for new documents but a failed insert more for each held one
    (docs/benchmarks.md, 2026-11-25: 0.2-0.4 ms against 3.4-4.0 ms per new document, 5.6-7.5 against 4.0-4.5 ms per
    held one), so it pays from about :data:`INSERT_FIRST_SHARE` new documents on."""
    return total > 0 and created / total >= INSERT_FIRST_SHARE


def _upsert_one(collection: Collection[dict[str, Any]], op: dict[str, Any]) -> tuple[bool, bool]:
    """Send one guarded upsert; return (applied, created). Not applied: the duplicate-key signal, a newer document
    won (the guard's filter matched nothing, so the upsert tried to insert an ``_id`` that exists)."""
    reply = _update_one(collection, op)
    if _write_errors(reply, "update"):
        return False, False
    return True, bool(reply.get("upserted"))


def apply_upserts(
    collection: Collection[dict[str, Any]], ops: Iterable[dict[str, Any]], chunk: int = UPDATE_CHUNK
) -> tuple[int, int]:
    """Run the guarded upserts; return (applied, stale). Raises on any write error other than the stale signal.

    No read comes first (FerretDB never pushes ``$in`` down: such a read scans the collection). Per ``chunk`` of
    operations, either every upsert goes alone through the version guard, or, when the chunk before it was mostly
    new documents (:func:`insert_first_next`), the documents are first inserted as new (:func:`_insert_new`) and
    only the upserts whose ``_id`` was held go through the guard. The first chunk goes through the guard: a small
    batch, the near-real-time case, mostly updates documents that exist.
    """
    applied = stale = 0
    insert_first = False
    pending = list(ops)
    for start in range(0, len(pending), chunk):
        part = pending[start : start + chunk]
        created, held = _insert_new(collection, part) if insert_first else (0, part)
        applied += created
        for op in held:
            done, new = _upsert_one(collection, op)
            applied, stale, created = applied + int(done), stale + int(not done), created + int(new)
        insert_first = insert_first_next(created, len(part))
    return applied, stale


def apply_updates(
    collection: Collection[dict[str, Any]], ops: Iterable[dict[str, Any]], chunk: int = UPDATE_CHUNK
) -> int:
    """Run guarded ``update`` statements that never insert (no duplicate-key signal to read); return how many
    documents matched. Raises on any write error. Each statement is its own command (see the note at the top), so
    ``chunk`` no longer changes what is sent; it stays for the callers."""
    del chunk
    matched = 0
    for op in ops:
        reply = _update_one(collection, op)
        errors = reply.get("writeErrors", [])
        if errors:
            first = errors[0]
            raise OperationFailure(f"MongoDB update failed: {first.get('errmsg')}", first.get("code"), reply)
        matched += int(reply.get("n", 0))
    return matched
