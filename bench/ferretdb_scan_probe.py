"""Cost of one projection statement against the size of the collection, on the MongoDB of the settings (the local
FerretDB). Per size, the median of ``--statements`` single-statement commands each:

- ``upsert_insert``: the guarded upsert of ``processors.enrichment.projection`` creating a new document;
- ``upsert_update``: the same updating a held document (newer version);
- ``upsert_stale``: the same refused by the guard (older version; the duplicate-key "stale" signal);
- ``insert``: a plain ``insert`` of a new document, for reference;

then, per operation and median of ``--reps``, batches of ``--batch`` operations (``mixed``: half new documents, half
newer versions of held ones; ``replay``: the same again, all stale; ``held``: newer versions of held documents only;
``new``: new documents only) through ``apply_upserts`` and through its insert-first way (``insert_first``), and
``apply_upserts`` on ``--large-batch`` new documents; and the pre-read the projection used to make,
``find({_id: {$in: 50 ids}})``. Uses a scratch collection that it drops at the end; pass a database of a bench
tenant (it is dropped with the tenant).

    .stack/venv/bin/python bench/ferretdb_scan_probe.py --database metalake_bench-prop-abc123
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pymongo import MongoClient
from pymongo.collection import Collection
from pymongo.database import Database

from metalake.mongo import Doc
from metalake.settings import load_settings
from ops.settings import Settings
from ops.stack.paths import use_checkout_stack
from processors.enrichment.projection import _insert_new, _upsert_one, apply_upserts, guarded_upsert


class _Counters:
    """New document ids, and versions newer than any written so far (documents loaded at version 1)."""

    def __init__(self) -> None:
        self._ids = itertools.count()
        self._versions = itertools.count(2)

    def new_id(self) -> str:
        return f"n{next(self._ids)}"

    def newer(self) -> int:
        return next(self._versions)


def _ms(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return (time.perf_counter() - started) * 1000


def _median_ms(runs: list[Callable[[], object]], per: int = 1) -> float:
    return round(statistics.median(_ms(run) / per for run in runs), 3)


def _command(db: Database[Doc], command: Doc) -> Callable[[], object]:
    return lambda: db.command(command)


def _single_statements(
    db: Database[Doc], scratch: Collection[Doc], size: int, n: int, counters: _Counters
) -> dict[str, Any]:
    """Each statement alone in its command: the cost of one statement, not of a batch."""

    def update(op: Doc) -> Doc:
        return {"update": scratch.name, "updates": [op], "ordered": True}

    inserts = [update(guarded_upsert(counters.new_id(), 1, "b", {"deleted": False})) for _ in range(n)]
    held = [f"k{i * (size // n)}" for i in range(n)]  # spread over the collection, not only its first pages
    version = counters.newer()
    updates = [update(guarded_upsert(doc_id, version, "b", {"deleted": False})) for doc_id in held]
    stale = [update(guarded_upsert(doc_id, 1, "a", {"deleted": False})) for doc_id in held]
    plain = [{"insert": scratch.name, "documents": [{"_id": counters.new_id(), "version": 1}]} for _ in range(n)]
    return {
        "upsert_insert_ms": _median_ms([_command(db, c) for c in inserts]),
        "upsert_update_ms": _median_ms([_command(db, c) for c in updates]),
        "upsert_stale_ms": _median_ms([_command(db, c) for c in stale]),
        "insert_ms": _median_ms([_command(db, c) for c in plain]),
    }


def _insert_first(scratch: Collection[Doc], ops: list[Doc]) -> None:
    """apply_upserts' other way for a chunk: insert the documents as new, then the held ones through the guard."""
    _, held = _insert_new(scratch, ops)
    for op in held:
        _upsert_one(scratch, op)


def _projection(
    scratch: Collection[Doc], size: int, batch: int, reps: int, counters: _Counters, insert_first: bool = False
) -> dict[str, Any]:
    """A batch of new and held documents, its replay (all stale), a batch of newer versions of held documents only
    and one of new documents only; through ``apply_upserts`` (whose first chunk goes through the guard one upsert
    at a time) or, with ``insert_first``, inserted first."""
    apply: Callable[[Collection[Doc], list[Doc]], object] = _insert_first if insert_first else apply_upserts
    runs: list[Callable[[], object]] = []
    for rep in range(reps):
        held = [f"k{((rep + insert_first * reps) * batch + i) * 7919 % size}" for i in range(batch)]
        version = counters.newer()
        ops = [guarded_upsert(doc_id, version, "c", {"deleted": False}) for doc_id in held[: batch // 2]]
        ops += [guarded_upsert(counters.new_id(), 1, "c", {"deleted": False}) for _ in range(batch - len(ops))]
        newer = [guarded_upsert(doc_id, version + 1, "c", {"deleted": False}) for doc_id in held]
        new = [guarded_upsert(counters.new_id(), 1, "c", {"deleted": False}) for _ in range(batch)]
        runs += [lambda ops=ops: apply(scratch, ops), lambda ops=ops: apply(scratch, ops)]
        runs += [lambda newer=newer: apply(scratch, newer), lambda new=new: apply(scratch, new)]
        counters.newer()
    times = [_ms(run) / batch for run in runs]
    name = "insert_first" if insert_first else "apply_upserts"
    kinds = ("mixed", "replay", "held", "new")
    return {f"{name}_{k}_ms_per_op": round(statistics.median(times[i :: len(kinds)]), 3) for i, k in enumerate(kinds)}


def _large_new_batch(scratch: Collection[Doc], batch: int, reps: int, counters: _Counters) -> dict[str, Any]:
    """apply_upserts on ``batch`` new documents: after its first chunk it inserts first."""
    batches = [[guarded_upsert(counters.new_id(), 1, "c", {}) for _ in range(batch)] for _ in range(reps)]
    runs = [lambda ops=ops: apply_upserts(scratch, ops) for ops in batches]
    return {f"apply_upserts_new{batch}_ms_per_op": _median_ms(runs, per=batch)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", required=True)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--statements", type=int, default=9, help="single statements per measure (median)")
    parser.add_argument("--batch", type=int, default=20, help="operations per apply_upserts batch")
    parser.add_argument("--reps", type=int, default=3, help="apply_upserts batches per measure (median)")
    parser.add_argument("--large-batch", type=int, default=500, help="new documents of one large apply_upserts")
    args = parser.parse_args()
    mongo: MongoClient[Doc] = MongoClient(load_settings(Settings).mongo_uri, tz_aware=True)
    db = mongo[args.database]
    scratch = db["bench_scan_probe"]
    scratch.drop()
    now, size, counters = datetime.now(UTC), 0, _Counters()
    base = {"version": 1, "event_id": "a", "deleted": False, "updated_at": now, "pad": "x" * 200}
    try:
        for target in (int(s) for s in args.sizes.split(",")):
            for start in range(size, target, 10_000):
                scratch.insert_many([{**base, "_id": f"k{i}"} for i in range(start, min(start + 10_000, target))])
            size = target
            row: dict[str, Any] = {"docs": size}
            row |= _single_statements(db, scratch, size, args.statements, counters)
            row |= _projection(scratch, size, args.batch, args.reps, counters)
            row |= _projection(scratch, size, args.batch, args.reps, counters, insert_first=True)
            row |= _large_new_batch(scratch, args.large_batch, args.reps, counters)
            pre_read = {"find": scratch.name, "filter": {"_id": {"$in": [f"k{i}" for i in range(50)]}}}
            row["find_in50_ms"] = _median_ms([_command(db, pre_read) for _ in range(args.reps)])
            plan = db.command({"explain": {"find": scratch.name, "filter": guarded_upsert("k1", 9, "z", {})["q"]}})
            row["guard_filter_pushdown"] = plan.get("filterPushdown")
            print(json.dumps(row), flush=True)
    finally:
        scratch.drop()
        mongo.close()


if __name__ == "__main__":
    use_checkout_stack()  # settings read the checkout's .stack/ (in this process and its children)
    main()
