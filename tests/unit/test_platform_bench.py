"""The pure parts of bench/platform_bench.py (its package bench/freshness/): which probes each acknowledged event
gives (checked against the soak's real events), the per-kind sampling, the one Trino query for every due probe, the
pollers' backoff and timeout, the percentiles, the grouping per kind and store and the table."""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))  # as when bench/platform_bench.py runs: its folder first

from freshness import load, probes, report, stores, watch  # noqa: E402
from soak import catalog  # noqa: E402

from ops.demo import montecarlo  # noqa: E402


def _asset(tenant: str, urn: str, version: int, acked: float = 0.0) -> Any:
    return probes.keyed(probes.ASSETS, tenant, acked, {"urn": urn}, version)


def _drawn(n: int = 300) -> list[dict[str, Any]]:
    cat = catalog.TenantCatalog("pb-abc123", random.Random(3))  # noqa: S311 - test data
    return [e for _ in range(n) for e in cat.draw()]


def test_every_kind_of_the_soak_load_gives_its_probes() -> None:
    found = [p for e in _drawn() for p in probes.of_event("pb-abc123", 1.0, e)]
    kinds = {p.kind for p in found}
    assert kinds == {"assets", "classifications", "propagated_tags", "lineage"}
    edges = [e for e in _drawn() if e["type"] == catalog.EDGE]
    assert sum(p.kind == "lineage" for p in found) == len(edges) == sum(p.kind == "propagated_tags" for p in found)
    pii = [p for p in found if p.kind == "classifications" and p.mongo.filter["_id"].endswith("|PII")]
    assert pii and all(p.mongo.filter["_id"].rsplit("/", 1)[1].split("|")[0] in catalog.PII_COLUMNS for p in pii)


def test_an_asset_counts_when_its_version_or_a_newer_one_shows() -> None:
    p = _asset("pb-abc123", "u", 7)
    assert p.mongo == probes.MongoLook("assets", {"_id": "u", "version": {"$gte": 7}})
    assert p.trino.where.format("a", "b") == "t.urn = a AND t.version >= b" and p.trino.params == ("u", 7)


def test_an_incident_is_timed_as_its_row_and_as_its_tables_health() -> None:
    body = montecarlo.incident(catalog.SCHEMA, "t4", "0 rows", "inc-1").body
    row, health = probes.incident("pb-abc123", 1.0, body)
    assert (row.kind, row.mongo.filter) == ("incidents", {"incident_id": "inc-1"})
    assert health.kind == "health" and health.trino.params == (catalog.table_urn(4), "inc-1")


def test_acked_takes_the_accepted_events_of_a_batch_only() -> None:
    batch = _drawn(5)
    answer = {"results": [{"id": e["id"], "status": "accepted" if i else "rejected"} for i, e in enumerate(batch)]}
    got = load.acked("http://x/v1/events", json.dumps(batch).encode(), answer, 5.0)
    expected = [p for e in batch[1:] for p in probes.of_event("pb-abc123", 5.0, e)]
    assert [(p.kind, p.mongo) for p in got] == [(p.kind, p.mongo) for p in expected]
    body = montecarlo.incident(catalog.SCHEMA, "t0", "x", "inc-2").body
    assert [p.tenant for p in load.acked("http://x/webhooks/montecarlo/pb-t1", body, {}, 5.0)] == ["pb-t1"] * 2


def test_the_sampler_keeps_one_in_every_n_of_a_kind_and_every_one_of_the_others() -> None:
    sunk: list[Any] = []
    sampler = load.Sampler({"assets": 10}, [sunk.append])
    sampler.offer(_asset("t", f"u{i}", 1) for i in range(25))
    sampler.offer(probes.keyed(probes.EDGES, "t", 0.0, {"urn": f"u{i}", "upstream": "x"}, 1) for i in range(3))
    assert [p.kind for p in sunk] == ["assets"] * 3 + ["lineage"] * 3
    assert sampler.kept == sunk and sampler.seen == {"assets": 25, "lineage": 3}


def test_one_query_for_all_due_probes_one_join_per_tenant_view_and_condition() -> None:
    due = [
        _asset("a", "u1", 1),
        probes.incident("a", 0.0, montecarlo.incident(catalog.SCHEMA, "t1", "x", "i1").body)[1],
        _asset("a", "u2", 2),
        _asset("b", "u3", 3),
    ]
    sql, params = stores.union_sql(due, {"a": "sa", "b": "sb"})
    parts = sql.split(" UNION ALL ")
    assert len(parts) == 3  # a's assets, a's health (same view, another condition), b's assets
    assert parts[0] == (
        'SELECT DISTINCT p.i FROM (VALUES (0, ?, ?), (2, ?, ?)) AS p(i, c0, c1) JOIN "sa"."assets" t'
        " ON t.urn = p.c0 AND t.version >= p.c1"
    )
    assert params == ["u1", 1, "u2", 2, catalog.table_urn(1), "i1", "u3", 3]


def test_trino_gets_at_most_max_joins_groups_a_query_and_no_group_is_split() -> None:
    due = [_asset(f"t{n}", f"u{k}", 1) for n in range(7) for k in range(2)]
    split = stores.batches(due, max_joins=3)
    assert [len(b) for b in split] == [6, 6, 2]  # 3, 3 and 1 tenants, both probes of each together
    assert [p for b in split for p in b] == due
    assert all(len(stores.union_sql(b, {f"t{n}": "s" for n in range(7)})[0].split(" UNION ALL ")) <= 3 for b in split)


def _poller(found: set[str], timeout: float = 60.0) -> Any:
    return watch.Poller("mongodb", lambda ps: {id(p) for p in ps if p.tenant in found}, timeout, batch=100)


def test_the_poller_times_what_it_finds_backs_off_on_the_rest_and_gives_up_after_the_timeout() -> None:
    now = time.monotonic()
    seen, later, lost = (_asset(t, "u", 1, now - 1.0) for t in ("s", "l", "x"))
    lost.acked = now - 100.0
    poller = _poller({"s"})
    for p in (seen, later, lost):
        poller.add(p)
    poller.round()
    assert 1.0 <= seen.seen["mongodb"] < 2.0 and not later.seen and not lost.seen
    assert [d.probe for d in poller.pending] == [later]  # the lost one timed out: not visible, still in the report
    first = poller.pending[0].interval
    poller.pending[0].at = 0.0
    poller.round()
    assert poller.pending[0].interval == pytest.approx(min(first * 1.5, watch.BACKOFF["mongodb"][3]))
    assert poller.figures()["lookups"] == 3 and poller.figures()["errors"] == 0  # the lost one was not asked


def test_a_failed_lookup_is_counted_and_retried() -> None:
    def broken(_: list[Any]) -> set[int]:
        raise RuntimeError("trino down")

    poller = watch.Poller("trino", broken, 60.0)
    poller.add(_asset("t", "u", 1, time.monotonic() - 5.0))
    poller.round()
    assert len(poller.pending) == 1 and poller.figures()["errors"] == 1
    assert poller.figures()["first_error"] == "RuntimeError: trino down"


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (report.percentile(values, 0.5), report.percentile(values, 0.99)) == (50.0, 99.0)
    assert report.percentile([3.0], 0.99) == 3.0
    with pytest.raises(ValueError, match="no values"):
        report.percentile([], 0.5)


def test_the_summary_per_kind_and_store_counts_the_never_visible() -> None:
    def probe(kind: str, **seen: float) -> Any:
        p = _asset("t", "u", 1)
        p.kind, p.seen = kind, seen
        return p

    summary = report.summarize(
        [probe("lineage", mongodb=1.0), probe("assets", mongodb=0.5, trino=4.0), probe("assets", mongodb=1.5)]
    )
    assert list(summary) == ["assets", "lineage"]  # KINDS order
    assert summary["assets"]["mongodb"] == {"n": 2, "not_visible": 0, "p50_s": 0.5, "p99_s": 1.5, "max_s": 1.5}
    assert summary["assets"]["trino"]["not_visible"] == 1 and summary["lineage"]["trino"] == {"n": 0, "not_visible": 1}
    text = report.table(summary)
    assert "| assets | trino | 1 | 4.00 | 4.00 | 4.00 | 1 |" in text
    assert "| lineage | trino | 0 | - | - | - | 1 |" in text
