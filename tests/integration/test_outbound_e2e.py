"""Issue 5 end to end on the real stack: one PII tag event on a column reaches everything downstream of it.

A fresh dedicated tenant with two Trino data tables (``customers`` and ``report``, written with delta-rs as the
access tests do) and a column edge ``customers.email -> report.email``. The test runs, each with its own consumer
group so the shared stack's processors (if any run) never take its records: the tenant's own streaming job
(``streamjob.Job``), the propagation processor (``metalake propagation run --tenant``), the outbound runtime (a
process, SSRF allowlist for loopback set for it only) with Slack, Jira and signed-webhook subscriptions pointing at
local stand-ins, and the access runner (a thread). Then one ``classification.added`` on ``customers.email`` through
the tenant's priority topic must give: the propagated tag on ``report.email`` in MongoDB and Trino (origin, path,
depth), one Slack thread (the tag, the Jira link, the propagation), one Jira issue (commented with the downstream
list), one signed webhook for the propagated tag, and ``report.email`` masked for the tenant's plain Trino user and
clear for its PII user.
"""

from __future__ import annotations

import secrets
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from control.subscriptions.filters import Filters
from control.subscriptions.store import SubscriptionStore
from metalake.events import CloudEvent, new_event
from metalake.kafka import EventProducer
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import CONTROL_DATABASE, TenantNames, trino_user
from tests._support.accessit import EMAILS, make_data_table, query_as
from tests._support.itest import trino_rows, wait_for
from tests._support.jira_server import JiraServer
from tests._support.outbound_helpers import (
    JIRA_EMAIL,
    JIRA_TOKEN,
    SLACK_TOKEN,
    WEBHOOK_SECRET,
    jira_sub,
    slack_sub,
    subscribe,
)
from tests._support.outbound_runtime import MAIN_TOPICS, RETRY, RuntimeProcess, start_groups_at_end
from tests._support.pipeline_procs import PropagationProcess, access_runner, dedicated_tenant
from tests._support.sealing import stack_sealer
from tests._support.slack_server import SlackServer
from tests._support.streamjob import Job, publish_confirmed
from tests._support.trinoschema import schema_of
from tests._support.webhook_server import WebhookServer

pytestmark = pytest.mark.integration

SOURCE = "/tests/outbound-e2e"


def _event(event_type: str, tenant: str, data: dict[str, Any]) -> CloudEvent:
    return new_event(event_type, tenant, data, source=SOURCE)


def _catalog(tenant: str, table: dict[str, str]) -> list[CloudEvent]:
    """Both tables and their (non-PII-named) ``id`` columns as assets, and the column edge. The email columns are
    not published as assets: the job's name rules would tag them itself, and the downstream one must get its tag by
    propagation only."""
    assets = [
        _event("io.metalake.asset.upserted.v1", tenant, {"urn": urn, "version": 1, "kind": "table", "name": name})
        for name, urn in table.items()
    ] + [
        _event(
            "io.metalake.asset.upserted.v1",
            tenant,
            {"urn": f"{urn}/id", "version": 1, "kind": "column", "name": "id", "data_type": "bigint"},
        )
        for urn in table.values()
    ]
    edge = _event(
        "io.metalake.lineage.edge.added.v1",
        tenant,
        {"upstream": f"{table['customers']}/email", "urn": f"{table['report']}/email", "version": 1},
    )
    return [*assets, edge]


def _publish(settings: Settings, names: TenantNames, events: list[CloudEvent]) -> None:
    with EventProducer(settings) as producer:
        publish_confirmed(producer, events, names)


def _note(message: str) -> None:
    print(f"[outbound-e2e] {message}", file=sys.__stderr__, flush=True)


def test_a_pii_tag_event_reaches_mongodb_trino_slack_jira_webhooks_and_masks(
    settings: Settings,
    stack: StackManager,
    tenant: str,
    mongo: MongoClient[dict[str, Any]],
    trino_cursor: Any,
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    run = secrets.token_hex(4)
    slack, jira, hook = SlackServer(SLACK_TOKEN), JiraServer(JIRA_EMAIL, JIRA_TOKEN), WebhookServer(WEBHOOK_SECRET)
    for server in (slack, jira, hook):
        server.start()
    job: Job | None = None
    propagation: PropagationProcess | None = None
    outbound: RuntimeProcess | None = None
    # Inside the tenant's block: every process is stopped before the tenant and its database are dropped.
    with dedicated_tenant(settings, mongo, tenant) as names:
        try:
            schema = schema_of(names)
            table = {
                t: f"urn:metalake:trino:{settings.access.trino_instance}/lake/{schema}/{t}"
                for t in ("customers", "report")
            }
            source, downstream = f"{table['customers']}/email", f"{table['report']}/email"

            store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
            slack_sub(store, tenant, slack.base_url)
            jira_sub(store, tenant, jira.url)
            # Downstream tools want the propagated tags themselves (docs/outbound.md: without filters a webhook
            # would get every change of the tenant).
            subscribe(
                store,
                tenant,
                "hook",
                "webhook",
                {"url": f"{hook.url}/in"},
                {"key_id": "k1", "secret": WEBHOOK_SECRET},
                Filters(event_types=("tag.propagated",)),
            )
            for name in table:
                make_data_table(settings, trino_cursor, names, name)

            job = Job(tenant, tmp_path / "job.log")
            propagation = PropagationProcess(tenant, tmp_path / "propagation.log", f"it-propagation-{tenant}")
            groups = {"group_id": f"it-outbound-{run}", "retry_group_id": f"it-outbound-retry-{run}"}
            start_groups_at_end(settings, {groups["group_id"]: MAIN_TOPICS, groups["retry_group_id"]: RETRY})
            outbound = RuntimeProcess(
                settings,
                tmp_path / "outbound.log",
                allow_base_url_override=True,
                ssrf_allow=["127.0.0.0/8"],
                subscriptions_ttl_s=1,
                poll_timeout_s=0.2,
                http_timeout_s=5,
                **groups,
            ).start()
            _publish(settings, names, _catalog(tenant, table))

            with access_runner(settings, f"it-access-{run}") as access_alive:
                _note(f"processes started, catalog published ({time.monotonic() - started:.0f}s)")
                lineage = mongo[names.mongo_database]["lineage"]
                wait_for("the streaming job to apply the lineage edge", lambda: lineage.count_documents({}) == 1, 240)
                propagation.wait_ready()
                assert outbound.alive(), outbound.log()
                _note(f"catalog applied, publishing the tag ({time.monotonic() - started:.0f}s)")

                tagged = time.monotonic()
                tag = _event(
                    "io.metalake.classification.added.v1",
                    tenant,
                    {"urn": source, "version": 10, "tag": "PII", "source": "human", "actor": "dpo@example.org"},
                )
                with EventProducer(settings) as producer:
                    producer.publish([tag], lambda e: names.priority_topic)

                check_propagated(mongo, trino_cursor, names, source, downstream)
                _note(f"propagated tag in MongoDB and Trino after {time.monotonic() - tagged:.1f}s")
                check_masked(settings, names, access_alive)
                _note(f"report.email masked after {time.monotonic() - tagged:.1f}s")
                check_outbound(slack, jira, hook, outbound, source, downstream)
                _note(f"Slack, Jira and webhook done after {time.monotonic() - tagged:.1f}s")
        finally:
            for proc in (outbound, propagation, job):
                if proc is not None:
                    proc.stop()
            for server in (slack, jira, hook):
                server.stop()
    assert outbound is not None and propagation is not None
    assert outbound.proc is not None and outbound.proc.returncode == 0, outbound.log()
    assert propagation.proc.returncode == 0, propagation.tail()
    _note(f"total {time.monotonic() - started:.0f}s")


def check_propagated(
    mongo: MongoClient[dict[str, Any]], cursor: Any, names: TenantNames, source: str, downstream: str
) -> None:
    docs = mongo[names.mongo_database]["propagated_tags"]

    def live() -> list[tuple[str, str, str, list[str], int]]:
        return [(d["urn"], d["tag"], d["origin"], d["path"], d["depth"]) for d in docs.find({"deleted": False})]

    expected = (downstream, "PII", source, [source, downstream], 1)
    wait_for("the propagated tag in MongoDB", lambda: live() == [expected], timeout_s=120)
    sql = f'SELECT urn, tag, origin, path, depth, deleted FROM "{schema_of(names)}".propagated_tags'
    rows = wait_for("the propagated tag in Trino", lambda: trino_rows(cursor, sql), timeout_s=120)
    assert rows == [(*expected, False)]


def check_masked(settings: Settings, names: TenantNames, access_alive: Any) -> None:
    def sql(table: str) -> str:
        return f'SELECT email FROM lake."{schema_of(names)}".{table} ORDER BY id'

    plain, pii = trino_user(names.tenant_id), trino_user(names.tenant_id, pii=True)

    def masked() -> bool:
        access_alive()
        return query_as(settings, plain, sql("report")) == [["****"], ["****"]]

    wait_for("report.email (propagated PII) masked for the tenant's plain user", masked, timeout_s=120, interval_s=0.2)
    assert query_as(settings, plain, sql("customers")) == [["****"], ["****"]]  # the direct tag
    clear = [[EMAILS[0]], [EMAILS[1]]]
    assert query_as(settings, pii, sql("report")) == clear
    assert query_as(settings, pii, sql("customers")) == clear
    # Only the tagged column is masked.
    assert query_as(settings, plain, f'SELECT phone FROM lake."{schema_of(names)}".report ORDER BY id') == [
        ["phone-1"],
        ["phone-2"],
    ]


def check_outbound(
    slack: SlackServer,
    jira: JiraServer,
    hook: WebhookServer,
    outbound: RuntimeProcess,
    source: str,
    downstream: str,
) -> None:
    def done() -> bool:
        assert outbound.alive(), outbound.log()
        return len(slack.messages) >= 3 and bool(jira.comments.get("GOV-1")) and len(hook.verified) >= 1

    wait_for("3 Slack messages, a Jira comment and a signed webhook", done, timeout_s=120)
    time.sleep(3)  # anything extra (a second thread, issue or webhook) would come right after: let it show
    parent, *replies = slack.posts()
    ts = slack.messages[0]["ts"]
    assert "thread_ts" not in parent and [r["thread_ts"] for r in replies] == [ts, ts]
    assert [m["text"] for m in slack.messages] == [
        f"PII tag added to {source}",
        f"Jira issue GOV-1 opened for PII on {source}",
        f"PII on {source} propagated to 1 downstream asset(s): +1 added, -0 removed",
    ]
    assert parent["metadata"]["event_type"] == "metalake_classification_added"

    assert list(jira.issues) == ["GOV-1"] and len(jira.seen("/rest/api/3/issue", "POST")) == 1
    assert len(jira.comments["GOV-1"]) == 1
    assert downstream in str(jira.comments["GOV-1"][0]["body"])

    # Webhooks are at least once (a delivery interrupted in flight, e.g. by a second runtime of a concurrent test
    # that sees this tenant's subscriptions, is resent with the same id): receivers deduplicate on webhook-id.
    assert hook.rejected == 0
    by_id = {d["headers"]["webhook-id"]: d for d in hook.verified}
    assert len(by_id) == 1, [d["body"] for d in hook.verified]
    (delivery,) = by_id.values()
    body = delivery["body"]
    assert (body["type"], body["subscription"], body["change"]["asset"], body["change"]["tag"]) == (
        "tag.propagated",
        "hook",
        downstream,
        "PII",
    )
    assert delivery["headers"]["webhook-key-id"] == "k1"
    assert delivery["headers"]["Idempotency-Key"] == delivery["headers"]["webhook-id"]
