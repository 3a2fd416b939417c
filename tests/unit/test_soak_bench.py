"""The pure parts of bench/soak.py (its package bench/soak/): the events each tenant sends (checked with the real
ingest validation), the newest state it keeps, the receiver on a real loopback socket (signed as outbound signs), the
checks per event id, the recovery after a fault and the memory slope, the arguments and the report."""

from __future__ import annotations

import importlib
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors.ingest.validation import to_event
from processors.outbound.destinations.webhook.signing import SigningKey, sign

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))  # as when bench/soak.py runs: its folder first, the package ``soak`` in it

catalog = importlib.import_module("soak.catalog")
analysis = importlib.import_module("soak.analysis")
verify = importlib.import_module("soak.verify")
receiver_mod = importlib.import_module("soak.receiver")
faults_mod = importlib.import_module("soak.faults")
rss_mod = importlib.import_module("soak.rss")
recheck = importlib.import_module("soak.recheck")


def _catalog(seed: int = 1) -> Any:
    return catalog.TenantCatalog("soak-abc123", random.Random(seed))  # noqa: S311 - test data


def test_every_event_a_tenant_draws_passes_the_ingest_validation() -> None:
    cat = _catalog()
    drawn = [e for _ in range(500) for e in cat.draw()]
    for item in drawn:
        to_event(item, "soak-abc123")  # raises Rejected on a field the ingest API refuses
    types = Counter(e["type"] for e in drawn)
    assert set(types) == {catalog.UPSERT, catalog.EDGE, catalog.TAGGED}
    pii = [e for e in drawn if e["type"] == catalog.UPSERT and e["data"]["name"] in catalog.PII_COLUMNS]
    assert pii and all(e["data"]["data_type"] == "varchar" for e in pii)  # the text rules need a type


def test_versions_increase_per_asset_and_the_newest_accepted_wins() -> None:
    cat = _catalog()
    first = cat.new_table()
    again = cat.upsert(catalog.table_urn(0), "table", "t0")
    assert again["data"]["version"] > first[0]["data"]["version"]
    cat.accepted([again])
    cat.accepted(first)  # an older version accepted later does not replace the newest
    assert cat.newest[catalog.table_urn(0)] == (again["data"]["version"], again["id"])


def test_the_receiver_counts_signed_deliveries_per_change_and_refuses_a_bad_signature() -> None:
    rec = receiver_mod.Receiver(0, "s3cret")
    rec.up()
    try:
        body = json.dumps({"id": "d1", "type": "classification.added", "tenant": "t", "change": {"id": "c1"}}).encode()
        good = sign([SigningKey("k", "s3cret")], "d1", int(time.time()), body)
        bad = sign([SigningKey("k", "other")], "d1", int(time.time()), body)
        assert httpx.post(rec.url, content=body, headers=good).status_code == 204
        assert httpx.post(rec.url, content=body, headers=good).status_code == 204  # a resend: same change
        assert httpx.post(rec.url, content=body, headers=bad).status_code == 401
        port = rec.port
        rec.down()
        with pytest.raises(httpx.ConnectError):
            httpx.post(rec.url, content=body, headers=good)
        rec.up()
        assert rec.port == port  # the subscriptions keep pointing at it
    finally:
        rec.down()
    assert rec.counts.by_change == Counter({"c1": 2}) and rec.counts.rejected == 1


def test_checks_per_event_id() -> None:
    found = Counter({"a": 1, "b": 2, "c": 2, "x": 1})
    history = verify.history_check(found, {"a", "b", "c", "d"}, ambiguous={"c"})
    assert (history["lost"], history["duplicated"], history["duplicated_after_client_resend"]) == (1, 2, 1)
    assert history["unexpected"] == 1 and history["duplicated_examples"] == ["b"]
    state = verify.state_check({"u1": (2, "e2"), "u2": (1, "e1")}, {"u1": (2, "e2"), "u2": (3, "e3"), "u3": (1, "e")})
    assert (state["missing"], state["stale"]) == (1, 1)
    deliveries = verify.deliveries_check(Counter({"c1": 1, "c2": 3, "old": 1}), {"c1": "t", "c2": "t", "c3": "t"})
    assert (deliveries["lost"], deliveries["duplicated"], deliveries["duplicate_receipts"]) == (1, 1, 2)
    assert deliveries["from_before_the_run"] == 1
    with pytest.raises(AssertionError):
        verify.in_list(["ok", "x' OR 1=1 --"])


def test_recovery_is_the_time_until_p99_stays_under_the_objective() -> None:
    fault = faults_mod.Fault("kill-stream", at=1000.0)
    p99 = [(990.0, 5.0), (1010.0, 50.0), (1030.0, 20.0), (1050.0, 40.0), (1070.0, 10.0), (1090.0, 8.0)]
    got = analysis.recovery(fault, 2000.0, p99)
    assert (got["under_objective_after_s"], got["p99_peak_s"]) == (70.0, 50.0)
    assert analysis.recovery(fault, 2000.0, [(1010.0, 3.0)])["under_objective_after_s"] == 0.0
    assert analysis.recovery(fault, 2000.0, [(1010.0, 31.0)])["under_objective_after_s"] is None


def test_each_store_has_its_own_recovery_beside_the_worse_ones() -> None:
    faults = [faults_mod.Fault("kill-stream", at=1000.0), faults_mod.Fault("restart-kafka", at=1300.0)]
    p99 = {
        "mongodb": [(1010.0, 40.0), (1050.0, 4.0), (1310.0, 3.0)],
        "delta": [(1010.0, 90.0), (1050.0, 119.0), (1310.0, 119.0)],
    }
    got = analysis.recoveries(faults, 1600.0, p99)
    assert [f["by_store"] for f in got] == [{"delta": None, "mongodb": 50.0}, {"delta": None, "mongodb": 0.0}]
    assert [f["under_objective_after_s"] for f in got] == [None, None]  # the worse store's: delta's
    assert got[0]["p99_peak_s"] == 119.0


def test_memory_reports_restarts_and_the_slope_of_the_last_process() -> None:
    mib = analysis.MIB
    samples = [rss_mod.Sample(t * 60.0, {"stream": int((100 + t) * mib)}, {"stream": 1}, 1.0) for t in range(5)]
    samples += [rss_mod.Sample(t * 60.0, {"stream": int((50 + t / 2) * mib)}, {"stream": 2}, 3.0) for t in range(5, 30)]
    got = analysis.memory(samples)["stream"]
    assert (got["start_mib"], got["max_mib"], got["restarts"]) == (100.0, 104.0, 1)
    assert got["slope_mib_per_h"] == pytest.approx(30.0)  # 0.5 MiB a minute
    assert analysis.load_average(samples)["max"] == 3.0


def test_recheck_compares_delta_with_kafka_per_event_id() -> None:
    mine = [("ce_id", b"e1"), ("ce_source", catalog.SOURCE.encode()), ("ce_tenantid", b"soak-1")]
    assert recheck._ours(mine, {"soak-1"}) == "e1"
    assert recheck._ours(mine, {"soak-2"}) is None
    assert recheck._ours([("ce_id", b"e1"), ("ce_source", b"/other"), ("ce_tenantid", b"soak-1")], {"soak-1"}) is None
    kafka = {
        "a": [("p", 0, 1)],
        "b": [("p", 0, 2), ("p", 0, 3)],
        "c": [("p", 1, 5)],
        "d": [("p", 1, 4)],
        "e": [("b", 0, 1)],
    }
    got = recheck.compare(kafka, Counter({"a": 1, "b": 2, "c": 2, "x": 1}), {("p", 0): 10, ("p", 1): 6})
    assert (got["lost"], got["pending"], got["twice_in_kafka"]) == (1, 1, 1)  # e: no batch read it yet; d: lost
    assert got["lost_examples"] == ["d"]
    assert got["more_rows_examples"] == ["c"] and got["in_delta"] == 3 and got["committed_by_the_lake_query"] == 4


def test_the_committed_offsets_are_the_last_committed_batch_of_the_checkpoint(tmp_path: Path) -> None:
    for n, end in ((0, 5), (1, 9), (2, 12)):
        (tmp_path / "offsets").mkdir(exist_ok=True)
        (tmp_path / "offsets" / str(n)).write_text(f'v1\n{{}}\n{{"p": {{"0": {end}}}}}\n')
    (tmp_path / "commits").mkdir()
    for n in (0, 1):  # batch 2 planned, not committed
        (tmp_path / "commits" / str(n)).write_text("v1\n{}\n")
    assert recheck.committed(tmp_path) == {("p", 0): 9}


def test_the_report_renders_every_table() -> None:
    report = importlib.import_module("soak.report")
    fault = {**vars(faults_mod.Fault("kill-stream", 60.0, 160.0, ["restarted by the bench"])), "p99_peak_s": 90.0}
    history = {"accepted": 3, "lost": 0, "duplicated": 0, "duplicated_after_client_resend": 0, "unexpected": 0}
    state = {"assets": 2, "missing": 0, "stale": 0}
    summary = {
        "date": "2026-11-29 19:12 UTC", "command": "python bench/soak.py", "machine": "2 cores", "t0": 0.0,
        "args": {"rate": 200.0}, "load_average": {"mean": 1.0, "max": 2.0},
        "load": {"accepted_per_s": 199.0, "accepted": 3, "rejected": 0, "unsent": 0, "skipped": 0, "resends": 0,
                 "incidents": 1, "statuses": {"200": 1}},
        "checks": {"delta_history": history, "delta_current": state, "mongodb_current": state,
                   "incidents_delta": {"accepted": 1, "lost": 0, "duplicated": 0},
                   "deliveries": {"expected": 1, "lost": 0, "duplicated": 0, "duplicate_receipts": 0,
                                  "from_before_the_run": 0},
                   "drain": {"seconds": 5, "settled": True}},
        "faults": [{**fault, "under_objective_after_s": None}],
        "memory": analysis.memory([rss_mod.Sample(0.0, {"kafka": analysis.MIB}, {"kafka": 1}, 1.0)]),
        "unplanned_exits": [{"service": "access", "at": 120.0, "error": "KafkaException: ...", "restarted": True}],
    }  # fmt: skip
    text = report.markdown(summary)
    assert "| 1.0 | kill-stream | 100 | 90.0 | not before the next fault |" in text
    assert "| 2.0 | access | `KafkaException: ...` | True |" in text
