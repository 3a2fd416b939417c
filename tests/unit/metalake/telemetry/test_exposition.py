"""GET /metrics over real HTTP, on the processors' health server and on a FastAPI app served by uvicorn: 404 without a
token set, 401 without the token, the exposition with it; the names and labels of the metrics contract, exactly, and
no tenant label anywhere."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import uvicorn
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from metalake.http.health import HealthServer
from metalake.http.metrics import install_metrics
from metalake.telemetry import metrics
from metalake.telemetry.exposition import CONTENT_TYPE, install_meter_provider

# Ports of this suite's own block (28100-28199).
HEALTH_PORT, APP_PORT, OFF_PORT = 28110, 28111, 28112
TOKEN = "scrape-token-0123456789"

# The metrics contract (docs/operations.md#metrics): exposed name -> (type, labels).
CONTRACT: dict[str, tuple[str, frozenset[str]]] = {
    "metalake_freshness_seconds": ("histogram", frozenset({"store", "query"})),
    "metalake_consumer_lag_records": ("gauge", frozenset({"group", "topic", "partition"})),
    "metalake_batch_step_seconds": ("histogram", frozenset({"query", "step"})),
    "metalake_events": ("counter", frozenset({"source", "outcome", "reason"})),
    "metalake_intake_request_seconds": ("histogram", frozenset({"source"})),
    "metalake_deliveries": ("counter", frozenset({"destination", "outcome"})),
    "metalake_delivery_seconds": ("histogram", frozenset({"destination"})),
    "metalake_http_requests": ("counter", frozenset({"route", "method", "status"})),
    "metalake_http_request_seconds": ("histogram", frozenset({"route", "method"})),
    "metalake_crawl_assets": ("counter", frozenset({"connector"})),
    "metalake_erasure_queue_depth": ("gauge", frozenset()),
    "metalake_erasure_oldest_seconds": ("gauge", frozenset()),
    "metalake_provisioning_queue_depth": ("gauge", frozenset()),
    "metalake_provisioning_oldest_seconds": ("gauge", frozenset()),
    "metalake_provisioning_step_seconds": ("histogram", frozenset({"action", "step", "outcome"})),
    "metalake_trino_query_seconds": ("histogram", frozenset({"outcome"})),
    "metalake_ready": ("gauge", frozenset()),
}


@pytest.fixture(scope="module", autouse=True)
def _provider() -> None:
    install_meter_provider()


def _get(url: str, token: str | None = None, scheme: str = "Bearer") -> tuple[int, str, str]:
    headers = {"Authorization": f"{scheme} {token}"} if token is not None else {}
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 - loopback test server
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def _families(text: str) -> dict[str, tuple[str, set[str]]]:
    """metalake_* families of an exposition: name -> (type, label names of every sample)."""
    out: dict[str, tuple[str, set[str]]] = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith("metalake_"):
            labels = {k for s in family.samples for k in s.labels if k not in ("le", "quantile")}
            out[family.name] = (family.type, labels)
    return out


def _assert_refuses(url: str) -> None:
    assert _get(url)[0] == 401
    assert _get(url, "wrong-token")[0] == 401
    assert _get(url, TOKEN, scheme="Basic")[0] == 401
    assert _get(url, TOKEN[:-1])[0] == 401


@pytest.fixture
def health_server() -> Iterator[HealthServer]:
    server = HealthServer("127.0.0.1", HEALTH_PORT, lambda: None, {"ok": lambda: None}, 1.0, SecretStr(TOKEN))
    server.start()
    yield server
    server.close()


def test_the_health_server_serves_metrics_only_with_the_token(health_server: HealthServer) -> None:
    url = f"http://127.0.0.1:{HEALTH_PORT}/metrics"
    _assert_refuses(url)
    status, content_type, body = _get(url, TOKEN)
    assert (status, content_type) == (200, CONTENT_TYPE)
    assert "metalake_ready 1.0" in body.splitlines()
    assert "process_resident_memory_bytes" in body
    # Readiness is read at each scrape: a check going down turns it to 0.
    health_server.checks["down"] = lambda: (_ for _ in ()).throw(ConnectionError("refused"))
    assert "metalake_ready 0.0" in _get(url, TOKEN)[2].splitlines()
    assert _get(f"http://127.0.0.1:{HEALTH_PORT}/readyz")[0] == 503


def test_without_a_token_set_metrics_are_off() -> None:
    server = HealthServer("127.0.0.1", OFF_PORT, lambda: None, {}, 1.0, None).start()
    try:
        assert _get(f"http://127.0.0.1:{OFF_PORT}/metrics", TOKEN)[0] == 404
        assert _get(f"http://127.0.0.1:{OFF_PORT}/healthz")[0] == 200
    finally:
        server.close()


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/v1/tenants/{tenant}/things/{thing}")
    def thing(tenant: str, thing: str) -> dict[str, str]:
        return {"thing": thing}

    install_metrics(app, SecretStr(TOKEN))
    return app


@pytest.fixture(scope="module")
def app_server() -> Iterator[str]:
    server = uvicorn.Server(
        uvicorn.Config(_app(), host="127.0.0.1", port=APP_PORT, log_level="warning", lifespan="off", ws="none")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{APP_PORT}"
    server.should_exit = True
    thread.join(10)


def _requests(body: str, route: str, status: str) -> float:
    for family in text_string_to_metric_families(body):
        if family.name == "metalake_http_requests":
            for sample in family.samples:
                if sample.labels == {"route": route, "method": "GET", "status": status}:
                    return float(sample.value)
    return 0.0


def test_a_fastapi_app_counts_requests_by_route_template_never_the_path(app_server: str) -> None:
    _assert_refuses(f"{app_server}/metrics")
    before = _get(f"{app_server}/metrics", TOKEN)[2]
    for tenant in ("acme", "globex", "initech"):
        assert _get(f"{app_server}/v1/tenants/{tenant}/things/t1")[0] == 200
    assert _get(f"{app_server}/no/such/acme")[0] == 404
    status, content_type, body = _get(f"{app_server}/metrics", TOKEN)
    assert (status, content_type) == (200, CONTENT_TYPE)
    template = "/v1/tenants/{tenant}/things/{thing}"
    assert _requests(body, template, "200") - _requests(before, template, "200") == 3
    assert _requests(body, "none", "404") - _requests(before, "none", "404") == 1
    assert "acme" not in body and "globex" not in body
    assert "http_server_" not in body  # FastAPI's own meters of the same requests are dropped: counted once


def test_every_contract_metric_is_exposed_under_its_exact_name_and_labels(app_server: str) -> None:
    # One recording of each instrument with the contract's labels, through the real reader and HTTP exposition.
    metrics.FRESHNESS.observe(1.5, {"store": "delta", "query": "q-lake"})
    metrics.BATCH_STEP.record(0.2, {"query": "q-lake", "step": "parse"})
    metrics.EVENTS.add(1, {"source": "ingest", "outcome": "refused", "reason": "invalid"})
    metrics.INTAKE_REQUEST.record(0.01, {"source": "ingest"})
    metrics.DELIVERIES.add(1, {"destination": "slack", "outcome": "delivered"})
    metrics.DELIVERY.record(0.3, {"destination": "slack"})
    metrics.CRAWL_ASSETS.add(4, {"connector": "postgres"})
    metrics.TRINO_QUERY.record(0.4, {"outcome": "ok"})
    metrics.PROVISIONING_STEP.record(0.1, {"action": "provision", "step": "access", "outcome": "done"})
    unwatch = [
        metrics.CONSUMER_LAG.watch(lambda: [(3.0, {"group": "g", "topic": "t", "partition": "0"})]),
        metrics.ERASURE_QUEUE_DEPTH.watch(lambda: [(2.0, {})]),
        metrics.ERASURE_OLDEST.watch(lambda: [(60.0, {})]),
        metrics.PROVISIONING_QUEUE_DEPTH.watch(lambda: [(0.0, {})]),
        metrics.PROVISIONING_OLDEST.watch(lambda: [(0.0, {})]),
        metrics.readiness(lambda: True),
    ]
    try:
        assert _get(f"{app_server}/v1/tenants/acme/things/x")[0] == 200
        body = _get(f"{app_server}/metrics", TOKEN)[2]
    finally:
        for stop in unwatch:
            stop()
    families = _families(body)
    assert set(CONTRACT) <= set(families)
    for name, (kind, labels) in CONTRACT.items():
        assert families[name] == (kind, labels), name
    for suffix_name in ("metalake_events_total", "metalake_freshness_seconds_bucket", "metalake_ready "):
        assert suffix_name in body
    assert not any("tenant" in labels for _, labels in families.values())
    assert "acme" not in body  # the tenant in the path is not a label value either
