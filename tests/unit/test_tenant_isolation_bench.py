"""The pure parts of bench/tenant_isolation.py (and its two helpers, bench/tenant_isolation_setup.py and
bench/trickle_receiver.py): the arguments, the statistics and the report, the loopback check, what counts as a victim's
failure, the bodies it sends (checked with the real ingest validation and OpenLineage mapping), the state file, and
the trickling receiver on a real loopback socket."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import math
import socket
import stat
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import httpx
import pytest

from connectors.ingest.validation import to_event
from connectors.openlineage.mapping import InvalidLineage, body_digest, map_event

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str) -> ModuleType:
    # Under its plain name: the bench's scripts import each other as modules of bench/ (their folder is on sys.path
    # when they run).
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


trickle = _load("trickle_receiver")
report = _load("tenant_isolation_report")
setup = _load("tenant_isolation_setup")
bench = _load("tenant_isolation")


def _phase(ingest: list[float], sql: list[float], **flood: int) -> Any:
    phase = report.Phase(ingest_ms=ingest, sql_ms=sql, load1=1.0, cpu_busy=50.0)
    phase.flood.update(flood)
    return phase


# -- arguments --------------------------------------------------------------------------------------------------------


def test_defaults_are_the_documented_ones() -> None:
    args = bench.parse_args([])
    assert (args.rounds, args.seconds, args.reuse) == (3, 20.0, False)
    assert args.ol_kinds == ["deep", "wide"] and args.dlq_ignore_retry_after is False


def test_arguments_parse_and_bounds_are_enforced() -> None:
    args = bench.parse_args(["--rounds", "5", "--seconds", "2.5", "--ol-kinds", "wide", "--reuse"])
    assert (args.rounds, args.seconds, args.ol_kinds, args.reuse) == (5, 2.5, ["wide"], True)
    for bad in (["--rounds", "0"], ["--ol-depth", "401"], ["--ol-kinds", "huge"], ["--seconds", "x"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)


def test_targets_are_loopback_only() -> None:
    targets = bench.loopback_targets("127.0.0.1", 8000, "0.0.0.0", 8083)  # noqa: S104 - a listen-all setting
    assert (targets.api, targets.connect) == ("http://127.0.0.1:8000", "http://127.0.0.1:8083")
    assert bench.loopback_targets("::1", 8000, "127.0.0.1", 8083).api == "http://[::1]:8000"
    assert bench.loopback_targets("localhost", 8000, "127.0.0.1", 8083).api == "http://localhost:8000"
    with pytest.raises(SystemExit, match="loopback"):
        bench.loopback_targets("127.0.0.1", 8000, "192.0.2.10", 8083)


def test_the_flood_runs_from_another_loopback_address_than_the_victim() -> None:
    assert bench.NOISY_ADDRESS != "127.0.0.1"
    assert bench.ipaddress.ip_address(bench.NOISY_ADDRESS).is_loopback


# -- statistics and report --------------------------------------------------------------------------------------------


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(100, 0, -1)]
    assert report.percentile(values, 0.5) == 51.0
    assert report.percentile(values, 0.99) == 100.0
    assert report.percentile([7.0], 0.99) == 7.0
    assert math.isnan(report.percentile([], 0.5))


def test_summaries_are_medians_over_rounds_and_the_flood_per_round() -> None:
    phases = [
        _phase([10.0, 20.0], [100.0], **{"tags 202": 4}),
        _phase([30.0, 40.0], [300.0], **{"tags 202": 6, "dead-letters 429": 3}),
        _phase([50.0, 60.0], [200.0]),
    ]
    summary = report.summarize(phases)
    assert (summary.ingest_p50, summary.ingest_p99, summary.ingests) == (40.0, 40.0, 2)
    assert (summary.sql_p50, summary.sql_p99, summary.queries) == (200.0, 200.0, 1)
    assert summary.flood == {"dead-letters 429": 1.0, "tags 202": pytest.approx(10 / 3)}
    assert (summary.load1, summary.cpu_busy, summary.failures) == (1.0, 50.0, 0)


def test_a_phase_without_samples_does_not_hide_the_others() -> None:
    summary = report.summarize([_phase([], []), _phase([5.0], [7.0])])
    assert (summary.ingest_p99, summary.sql_p99) == (5.0, 7.0)
    assert math.isnan(report.summarize([_phase([], [])]).sql_p99)


def test_the_verdict_compares_each_p99_with_the_goal() -> None:
    quiet = report.summarize([_phase([10.0], [100.0])])
    within = report.summarize([_phase([19.0], [150.0])])
    beyond = report.summarize([_phase([19.0], [250.0])])
    assert "ingest 1.90x, SQL 1.50x: within 2x" in report.verdict(quiet, within)
    assert "NOT within 2x" in report.verdict(quiet, beyond)
    # No figure is no pass.
    assert "NOT within" in report.verdict(quiet, report.summarize([_phase([], [150.0])]))
    assert math.isnan(report.ratio(5.0, 0.0))


def test_markdown_rows_fit_the_header() -> None:
    quiet = report.summarize([_phase([10.0], [100.0])])
    flood = report.summarize([_phase([15.0], [120.0], **{"lineage-deep 400": 80})])
    columns = report.HEADER.splitlines()[0].count("|")
    rows = report.markdown_rows(quiet, flood, "webhook: 3 deliveries taken")
    assert [row.count("|") for row in rows] == [columns, columns]
    assert rows[0].startswith("| quiet | 10.0 / 10.0 |") and "lineage-deep 400: 80" in rows[1]
    assert "1.50x, 1.20x" in rows[1] and "webhook: 3 deliveries taken" in rows[1]


def test_the_cpu_share_comes_from_proc_stat() -> None:
    before = report.cpu_times("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8\n")
    after = report.cpu_times("cpu  200 0 100 1000 100 0 0 0 0 0\n")
    assert before == (150, 1000) and after == (300, 1400)
    assert report.busy_percent(before, after) == pytest.approx(37.5)
    assert math.isnan(report.busy_percent(after, after))


def test_the_webhook_line_and_the_command_line() -> None:
    stats = trickle.TrickleStats(3, 1, 2, 41.6, 17, {"client closed": 1})
    assert report.webhook_line(stats) == (
        "webhook: 3 deliveries taken (client closed 1; 2 still held), longest held 42 s, 1 refused"
    )
    assert report.command_line(["--sql", "SELECT 1"]) == (
        ".stack/venv/bin/python bench/tenant_isolation.py --sql 'SELECT 1'"
    )


def test_the_progress_line_names_each_figure() -> None:
    phase = _phase([10.0, 30.0], [100.0], **{"tags 202": 2})
    phase.failures["sql 503"] += 1
    line = report.phase_line("round 1 flood", phase, "webhook: 2 deliveries taken")
    assert line.startswith("round 1 flood: ingest p50 30.0 ms p99 30.0 ms (2), SQL p50 100.0 ms p99 100.0 ms (1)")
    assert "victim failures {'sql 503': 1}" in line and "flood {'tags 202': 2}; webhook: 2" in line
    assert report.phase_line("quiet", _phase([], [])).endswith("CPU 50 %")


# -- the victim's answers, the flood's pauses -------------------------------------------------------------------------


def test_what_counts_as_a_victims_failure() -> None:
    assert bench.ingest_failure(httpx.Response(200, json={"accepted": 2, "rejected": 0})) is None
    assert bench.ingest_failure(httpx.Response(200, json={"accepted": 1, "rejected": 1})) == "ingest rejected"
    assert bench.ingest_failure(httpx.Response(503, json={"type": "/problems/unavailable"})) == "ingest 503"
    assert bench.sql_failure(httpx.Response(200, json={"rows": [[1]], "reason": None})) is None
    assert bench.sql_failure(httpx.Response(200, json={"rows": [], "reason": "error"})) == "sql error"
    assert bench.sql_failure(httpx.Response(200, content=b'{"rows": [[1]')) == "sql unreadable"
    assert bench.sql_failure(httpx.Response(429)) == "sql 429"


def test_retry_after_is_capped() -> None:
    assert bench.retry_after(httpx.Response(429, headers={"retry-after": "0.2"})) == 0.2
    assert bench.retry_after(httpx.Response(429, headers={"retry-after": "30"})) == 1.0
    assert bench.retry_after(httpx.Response(429, headers={"retry-after": "soon"})) == 1.0
    assert bench.retry_after(httpx.Response(429)) == 1.0


# -- bodies, through the real validation and mapping ------------------------------------------------------------------


def test_victim_batches_are_valid_events_of_the_tenant() -> None:
    batch = setup.ingest_batch("victim-abc123", 5, 998)
    events = [to_event(item, "victim-abc123") for item in batch]
    assert {e.type for e in events} == {"io.metalake.asset.upserted.v1"}
    assert len({item["id"] for item in batch}) == 5 and len({item["data"]["urn"] for item in batch}) == 5
    assert batch[2]["data"]["urn"].endswith("/t0")  # a rolling set of tables


def test_nested_fields_have_the_asked_shape() -> None:
    fields = setup.nested_fields(depth=3, width=2, name_bytes=12)
    levels, columns, level = 0, 0, fields
    while level:
        levels += 1
        columns += len(level)
        assert all(len(f["name"]) == 12 for f in level)
        level = next((f["fields"] for f in level if "fields" in f), [])
    assert (levels, columns) == (3, 3 * 2 + 2)


def test_wide_lineage_events_map_to_that_many_columns() -> None:
    body = setup.lineage_event(1, depth=1, width=300, name_bytes=16)
    mapped = map_event(json.loads(body), "noisy-abc123", body_digest(body), max_events=10_000)
    assert (mapped.kind, mapped.event_type, mapped.assets, mapped.columns) == ("run", "COMPLETE", 1, 300)


def test_deep_lineage_events_are_refused_by_the_mapping() -> None:
    body = setup.lineage_event(2, depth=12, width=1, name_bytes=256)
    with pytest.raises(InvalidLineage):
        map_event(json.loads(body), "noisy-abc123", body_digest(body), max_events=10_000)


def test_the_bench_sends_bodies_of_each_kind_asked() -> None:
    args = argparse.Namespace(ol_kinds=["wide"], ol_depth=5, ol_width=1, ol_name_bytes=8, ol_wide_columns=10)
    bodies = bench.lineage_bodies(args)
    assert list(bodies) == ["wide"] and len(bodies["wide"]) == 4
    runs = {json.loads(b)["run"]["runId"] for b in bodies["wide"]}
    assert len(runs) == 4


# -- the state file ---------------------------------------------------------------------------------------------------


def test_credentials_are_kept_owner_only_and_read_back(tmp_path: Path) -> None:
    settings: Any = SimpleNamespace(local_stack_dir=tmp_path / ".stack")
    assert setup.load_state(settings) is None
    creds = setup.Credentials(
        victim="victim-abc123",
        noisy="noisy-def456",
        victim_key="mlk_1_x",
        victim_reader=("mlc_r", "s1"),
        noisy_key="mlk_2_y",
        noisy_admins=(("mlc_a", "s2"), ("mlc_b", "s3")),
        noisy_assets=("urn:metalake:postgres:noisy-bench/shop/public/t0",),
        webhook_secret="w" * 32,
    )
    setup.save_state(settings, creds)
    assert setup.load_state(settings) == creds
    assert stat.S_IMODE(setup.state_path(settings).stat().st_mode) == 0o600


# -- the trickling receiver -------------------------------------------------------------------------------------------

REQUEST = b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"


def _wait(check: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_receiver_trickles_and_sees_the_client_hang_up() -> None:
    with trickle.TrickleReceiver(interval_s=0.3, pad_bytes=100) as receiver:
        port = receiver.port
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(REQUEST)
            client.settimeout(2)
            t0 = time.monotonic()
            got = b"".join(client.recv(1) for _ in range(3))
            elapsed = time.monotonic() - t0
        assert got == b"HTT"
        assert elapsed >= 0.5  # three bytes, two pauses of 0.3 s
        _wait(lambda: receiver.stats().ended == {"client closed": 1})
        stats = receiver.stats()
        assert (stats.connections, stats.open, stats.refused) == (1, 0, 0)
        assert 3 <= stats.bytes_sent <= 5 and stats.longest_held_s >= 0.5


def test_a_per_read_timeout_does_not_end_a_trickled_answer() -> None:
    """What makes the receiver a threat: every read gets a byte well within the client's read timeout."""
    answer = trickle.trickle_answer(20)
    with trickle.TrickleReceiver(interval_s=0.01, pad_bytes=20) as receiver:
        t0 = time.monotonic()
        got = httpx.post(receiver.url, content=b"{}", timeout=httpx.Timeout(5.0, read=0.5))
        elapsed = time.monotonic() - t0
        assert got.status_code == 200 and got.headers["x-trickle"] == "a" * 20
        assert elapsed >= 0.01 * (len(answer) - 1) * 0.9
        _wait(lambda: receiver.stats().ended == {"answer sent": 1})


def test_stop_ends_held_connections() -> None:
    receiver = trickle.TrickleReceiver(interval_s=30, pad_bytes=100)
    with receiver, socket.create_connection(("127.0.0.1", receiver.port)) as client:
        client.sendall(REQUEST)
        client.settimeout(2)
        assert client.recv(1) == b"H"
        t0 = time.monotonic()
        receiver.stop()
        assert time.monotonic() - t0 < 3
        assert receiver.stats().ended == {"stopped": 1}


def test_connections_over_the_cap_are_refused_at_once() -> None:
    with trickle.TrickleReceiver(interval_s=30, pad_bytes=100, max_connections=1) as receiver:
        port = receiver.port
        with socket.create_connection(("127.0.0.1", port)) as first:
            first.sendall(REQUEST)
            first.settimeout(2)
            assert first.recv(1) == b"H"
            with socket.create_connection(("127.0.0.1", port)) as second:
                second.settimeout(2)
                assert second.recv(1) == b""
            assert receiver.stats().refused == 1


def test_a_request_that_never_comes_whole_ends_the_connection() -> None:
    with trickle.TrickleReceiver(interval_s=30, pad_bytes=100) as receiver:
        port = receiver.port
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(b"POST /hook HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc")
            client.shutdown(socket.SHUT_WR)
            client.settimeout(2)
            assert client.recv(1) == b""
        _wait(lambda: receiver.stats().ended == {"request unreadable": 1})


# -- one phase against a stand-in of the platform on loopback ---------------------------------------------------------


class _Platform:
    """The routes the bench calls, answered at once; records which peer called which route."""

    def __init__(self) -> None:
        self.peers: dict[str, set[str]] = {}
        self.lock = threading.Lock()
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._answer()

            def _answer(self) -> None:
                route = self.path.split("?")[0].rsplit("/", 1)[-1]
                with platform.lock:
                    platform.peers.setdefault(route, set()).add(self.client_address[0])
                status, body = _ANSWERS[route]
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Retry-After", "0.1")
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"


_ANSWERS: dict[str, tuple[int, Any]] = {
    "token": (200, {"access_token": "t"}),
    "events": (200, {"accepted": 20, "rejected": 0}),
    "sql": (200, {"rows": [[1]], "reason": None}),
    "lineage": (400, {"type": "/problems/invalid-lineage-event"}),
    "dead-letters": (429, {"type": "/problems/rate-limited"}),
    "tags": (202, {"status": "accepted"}),
}


def test_a_flood_phase_measures_the_victim_and_floods_from_the_other_address() -> None:
    fake = _Platform()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    creds = setup.Credentials(
        "victim-abc123", "noisy-def456", "mlk_1_x", ("r", "s"), "mlk_2_y", (("a", "s"), ("b", "s")), ("urn:x",), "w"
    )
    args = bench.parse_args(
        ["--seconds", "1", "--ol-depth", "3", "--ol-wide-columns", "5", "--sql-interval", "0.1", "--ol-conns", "2"]
    )
    try:
        phase = asyncio.run(bench.run_phase(bench.Targets(fake.base, fake.base), creds, args, flood=True))
    finally:
        fake.server.shutdown()
        fake.server.server_close()
    # The victim is measured over and over (a loaded machine, as make test's second lane makes it, fits a few in 1 s).
    assert len(phase.ingest_ms) >= 2 and len(phase.sql_ms) >= 2 and not phase.failures
    assert {"lineage-deep 400", "lineage-wide 400", "dead-letters 429", "tags 202"} <= set(phase.flood)
    # Each lister waited out its 429 (Retry-After 0.1 s): about ten listings a second each, not thousands.
    assert phase.flood["dead-letters 429"] <= 2 * 15
    assert fake.peers["events"] == fake.peers["sql"] == {"127.0.0.1"}
    assert fake.peers["lineage"] == fake.peers["dead-letters"] == fake.peers["tags"] == {"127.0.0.2"}
    assert not math.isnan(phase.cpu_busy) and phase.load1 >= 0
