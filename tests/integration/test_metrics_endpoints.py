"""GET /metrics of real processes of this checkout on the stack: a propagation processor (its health port) and the
admin API (``python -m api``), each with a metrics token: 401 without it, the exposition with it; readiness, the
processor's consumer lag, the API's requests by route template. (The streaming job's freshness, batch steps and lag:
tests/integration/test_lake_dedicated.py, whose job serves them.)

Ports of this suite's own block (28100-28199).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import CHANGES_TOPIC
from tests._support.itest import wait_for
from tests._support.outbound_runtime import start_groups_at_end
from tests._support.pipeline_procs import PropagationProcess
from tests._support.scrape import sample, series, status_of, try_scrape

pytestmark = pytest.mark.integration

PROPAGATION_PORT, API_PORT = 28130, 28131


@pytest.fixture
def token() -> str:
    return secrets.token_urlsafe(24)


def test_a_processor_serves_its_readiness_and_lag_behind_the_token(
    settings: Settings, stack: StackManager, tenant: str, token: str, tmp_path: Path
) -> None:
    group = f"it-metrics-{secrets.token_hex(4)}"
    start_groups_at_end(settings, {group: CHANGES_TOPIC})
    env = {"METALAKE_HEALTH__PORTS__PROPAGATION": str(PROPAGATION_PORT), "METALAKE_TELEMETRY__METRICS_TOKEN": token}
    processor = PropagationProcess(tenant, tmp_path / "propagation.log", group, env=env)
    url = f"http://127.0.0.1:{PROPAGATION_PORT}/metrics"
    try:
        processor.wait_ready()

        def lag_exposed() -> str | None:
            text = try_scrape(url, token)
            return text if text and series(text, "metalake_consumer_lag_records", {"group": group}) else None

        text = wait_for("the processor's lag in /metrics", lag_exposed, timeout_s=60)
        lags = series(text, "metalake_consumer_lag_records", {"group": group, "topic": CHANGES_TOPIC})
        assert lags and all(lag >= 0 for lag in lags), processor.tail()
        assert sample(text, "metalake_ready", {}) == 1
        assert sample(text, "process_resident_memory_bytes", {}) > 0
        assert status_of(url, None) == 401 and status_of(url, token[:-1]) == 401
        assert tenant not in text
    finally:
        assert processor.stop() == 0, processor.tail()


@pytest.fixture
def api_process(token: str, tmp_path: Path) -> Iterator[str]:
    log = tmp_path / "api.log"
    env = {**os.environ, "METALAKE_API__PORT": str(API_PORT), "METALAKE_TELEMETRY__METRICS_TOKEN": token}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "api"], env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{API_PORT}"
    try:

        def up() -> bool:
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            return status_of(f"{base}/healthz", None) == 200

        wait_for("python -m api to answer /healthz", up, timeout_s=60)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_admin_api_counts_requests_by_route_template_and_reports_ready(
    stack: StackManager, api_process: str, token: str, tenant: str
) -> None:
    url = f"{api_process}/metrics"
    assert status_of(url, None) == 401
    route = {"route": "/v1/tenants/{tenant}/clients", "method": "GET", "status": "401"}
    before = sample(try_scrape(url, token) or "", "metalake_http_requests_total", route)
    for _ in range(3):
        assert status_of(f"{api_process}/v1/tenants/{tenant}/clients", None) == 401
    text = try_scrape(url, token) or ""
    assert sample(text, "metalake_http_requests_total", route) - before == 3
    assert series(text, "metalake_http_request_seconds_count", {"route": "/v1/tenants/{tenant}/clients"})
    assert sample(text, "metalake_ready", {}) == 1
    assert series(text, "metalake_provisioning_queue_depth", {})
    assert tenant not in text
