"""``metalake demo`` end to end on the real stack, as ``make demo`` runs it: the API, the processors and the job.

The test starts the API and the processors through the stack manager when they are not running (and stops only
what it started); the demo runs as a subprocess with a fresh tenant and must exit 0 having shown every step.
"""

from __future__ import annotations

import re
import secrets
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from pymongo import MongoClient

from ops.settings import Settings
from ops.stack.manager import StackManager
from ops.stack.paths import find_project_root
from ops.stack.scrape_targets import HEALTH_PROCESS, JOBS
from ops.stack.services.prometheus import Prometheus
from tenants.naming import CHANGES_TOPIC, names_for
from tests._support.itest import wait_for
from tests._support.outbound_runtime import MAIN_TOPICS, RETRY, start_groups_at_end
from tests._support.prometheus_api import query, wait_targets_up
from tests._support.provisioning import provisioning_worker

SERVICES = ["api", "propagation", "outbound", "access", "connect"]


# Module-wide: the demo and the check of Prometheus' targets share one start of the processors.
@pytest.fixture(scope="module")
def processors(stack: StackManager, settings: Settings) -> Iterator[StackManager]:
    running = {s.name for s in stack.status() if s.state == "running"}
    missing = [name for name in SERVICES if name not in running]
    # Processors this test starts begin at the end of their topics, as on a fresh stack: the shared test stack's
    # metalake.changes holds every earlier test's changes, and working through them (deliveries to those tests'
    # long-gone receivers, with retries) held the demo's own webhooks back for minutes.
    groups: dict[str, str | Sequence[str]] = {
        "outbound": {settings.outbound.group_id: MAIN_TOPICS, settings.outbound.retry_group_id: RETRY},
        "propagation": {settings.propagation.group_id: CHANGES_TOPIC},
        "access": {settings.access.group_id: CHANGES_TOPIC},
    }
    start_groups_at_end(settings, {g: t for name in missing for g, t in groups.get(name, {}).items()})
    try:
        stack.up(missing)
        yield stack
    finally:
        # Also when a service fails to start: processors left running would act on every later test's tenants.
        stack.down(missing)


def test_the_demo_shows_the_whole_flow(
    processors: StackManager, settings: Settings, mongo: MongoClient[dict[str, Any]]
) -> None:
    tenant = f"it-demo-{secrets.token_hex(3)}"
    # The session's lake worker runs with provisioning off (tests/integration/conftest.py): the lake worker's
    # provisioning runs in this process for the demo's tenant, as `make demo`'s lake worker would run it (the rerun
    # below finds the tenant provisioned).
    with provisioning_worker(settings, mongo, lambda t: t == tenant):
        result = _demo(tenant)
    out = result.stdout
    steps = re.findall(r"^\[(\d+)\] (.*)$", out, flags=re.MULTILINE)
    assert [int(n) for n, _ in steps] == list(range(1, 12))
    assert all(re.search(r"^    \(\d+\.\d+s\)$", out, flags=re.MULTILINE) for _ in steps)
    assert f"Create tenant '{tenant}' through the API" in out
    # Both webhooks arrived at the demo's receiver and their HMAC signatures verified.
    assert re.search(r"classification\.added +\S+/customers/contact PII: signature verified", out)
    assert re.search(r"propagation\.completed +\S+/customers/contact PII: signature verified", out)
    assert re.search(r"tag\.propagated +\S+/orders/customer_contact PII: signature verified", out)
    assert "failed verification" not in out
    # The inbound side: a Monte Carlo connector with a generated secret, a signed incident accepted by the connector
    # worker (the stack's `connect` service), shown on the asset through the API, in Trino and as a signed webhook.
    assert "Monte Carlo connector 'monte-carlo' through the connectors API" in out
    assert re.search(r"signing secret \S+ generated \(kept in memory for the sender, never printed\)", out)
    incident = re.search(r"^    incident (\S+) on shop:public\.customers", out, flags=re.MULTILINE)
    assert incident is not None
    incident_id = incident.group(1)
    assert re.search(r"answer: accepted, events \['\S+'\]", out)
    assert re.search(rf"^    {incident_id}: opened, ANOMALIES", out, flags=re.MULTILINE)
    assert re.search(r"health degraded \(\d+ open incident", out)
    assert re.search(rf"incidents: {incident_id} opened on \S+/customers$", out, flags=re.MULTILINE)
    assert re.search(rf"incidents\.changed +\S+/customers {incident_id} opened: signature verified", out)
    assert re.search(rf"^    {incident_id} \| opened \| \S+/customers$", out, flags=re.MULTILINE)
    # The SQL step ran as the tenant's read-only client and saw the propagated tag.
    assert re.search(r"scope tenant:read sql:read", out)
    assert re.search(r"\S+/orders/customer_contact \| PII \| \S+/customers/contact \| 1", out)
    # Independently of what the demo printed: the projection holds the tag and its propagation.
    db = mongo[names_for(tenant, settings.lake_root).mongo_database]
    contact = "urn:metalake:postgres:shop-prod/shop/public/customers/contact"
    assert db["classifications"].count_documents({"urn": contact, "tag": "PII", "source": "human"}) == 1
    assert db["propagated_tags"].count_documents({"origin": contact, "tag": "PII", "depth": 1}) == 1
    customers = "urn:metalake:postgres:shop-prod/shop/public/customers"
    assert db["incidents"].count_documents({"incident_id": incident_id, "urn": customers, "status": "opened"}) == 1
    # Secrets stay out of the output: the admin secret is in the owner-only file only.
    admin = (settings.local_stack_dir / "demo-admin.json").read_text()
    secret = re.search(r'"client_secret": "([^"]+)"', admin)
    assert secret is not None and secret.group(1) not in out + result.stderr

    # A rerun on the same tenant reuses it, untags first, and shows the whole flow again.
    again = _demo(tenant).stdout
    assert "exists already; reusing it" in again and "    updated; filters:" in again
    assert re.search(r"classification\.removed +\S+/customers/contact PII: signature verified", again)
    assert re.search(r"tag\.propagated +\S+/orders/customer_contact PII: signature verified", again)
    # The connector is reconfigured and its secret rotated; the new incident arrives like the first one.
    assert "exists already; configuration replaced" in again
    assert re.search(r"incidents\.changed +\S+/customers \S+ opened: signature verified", again)
    assert db["classifications"].count_documents({"urn": contact, "tag": "PII", "deleted": {"$ne": True}}) == 1
    _top_shows_the_demos_freshness()


def _top_shows_the_demos_freshness() -> None:
    """`metalake stack top` right after the demo: every process up and ready, and the job's freshness of the last
    minute measured (Prometheus scrapes every 10 s: a few scrapes may pass before the window holds two samples)."""

    def probe() -> dict[str, list[str]] | None:
        done = subprocess.run(
            [sys.executable, "-m", "ops", "stack", "top"], capture_output=True, text=True, timeout=60, check=False
        )
        rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()[1:]}
        stream = rows.get("stream", [])
        return rows if done.returncode == 0 and len(stream) == 6 and stream[3] != "-" else None

    rows = wait_for("`metalake stack top` with the job's freshness", probe, timeout_s=90, interval_s=5)
    assert set(JOBS) <= set(rows), rows
    assert all(cells[0] == "yes" and cells[1] == "yes" for cells in rows.values()), rows
    p50, p99 = float(rows["stream"][3]), float(rows["stream"][4])
    assert 0 <= p50 <= p99 < 120, rows["stream"]


def test_prometheus_scrapes_every_process(processors: StackManager) -> None:
    # `metalake stack up` started Prometheus with the infrastructure; with the job, the API and the processors up,
    # every process's /metrics answers its bearer token (issue 23: "every process's targets are up").
    url = Prometheus().url(processors.context)
    health = wait_targets_up(url, ["prometheus", *JOBS], timeout_s=90)
    assert set(health) == {"prometheus", *JOBS}
    ready = {s["metric"]["job"]: s["value"][1] for s in query(url, "metalake_ready")}
    assert set(HEALTH_PROCESS) <= set(ready) and set(ready.values()) == {"1"}, ready


def _demo(tenant: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "ops", "demo", "--tenant", tenant, "--timeout", "420"],
        cwd=find_project_root(),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert result.returncode == 0, f"demo failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result
