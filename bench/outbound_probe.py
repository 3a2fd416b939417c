"""The outbound side of the propagation bench: a loopback receiver of signed webhooks, a webhook subscription for
the bench tenant, and the outbound runtime (``bench/outbound_child.py``: the build of ``processors.outbound.main``,
what ``metalake outbound run`` starts, scoped to the bench tenant's subscriptions) as a child process with its own
consumer groups, started at the end of the topics (a fresh group would
otherwise read the whole shared ``metalake.changes`` first) and with loopback let through the SSRF guard for that
process only."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupState, TopicPartition
from confluent_kafka.admin import AdminClient
from pymongo import MongoClient

from control.subscriptions.filters import Filters
from control.subscriptions.store import SubscriptionStore
from metalake.kafka import ensure_topics
from metalake.kafka.config import client_config, consumer_config
from metalake.sealing import sealer_for
from metalake.settings import load_settings
from ops.settings import Settings
from processors.outbound.destinations.webhook.signing import InvalidSignature, verify
from tenants.naming import CHANGES_TOPIC, dlq_topic, retry_topic

HOOK = "bench-hook"
# Which notifications count: the tag's own change and the end of its propagation run. The per-asset
# ``tag.propagated`` rows are left out on purpose (as Slack does by default): one per reached column would time the
# outbound runtime's throughput (thousands of deliveries), not the tag's notification.
COUNTED = ("classification.added", "propagation.completed")


@dataclass(frozen=True)
class Delivery:
    at: float  # time.monotonic() when the request was received
    kind: str
    asset: str | None
    tag: str | None
    webhook_id: str


class Receiver:
    """Accepts a delivery only if its signature verifies (as docs/outbound.md tells receivers to); keeps the first
    arrival of each ``webhook-id`` (retries resend the same id)."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.deliveries: dict[str, Delivery] = {}
        self.rejected = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                at = time.monotonic()
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status = receiver.receive(at, dict(self.headers.items()), body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def receive(self, at: float, headers: dict[str, str], body: bytes) -> int:
        try:
            verify(self.secret, headers, body, int(time.time()))
        except InvalidSignature:
            with self._lock:
                self.rejected += 1
            return 401
        doc = json.loads(body)
        change = doc.get("change") or {}
        delivery = Delivery(at, doc.get("type", ""), change.get("asset"), change.get("tag"), doc.get("id", ""))
        with self._lock:
            self.deliveries.setdefault(delivery.webhook_id, delivery)
        return 204

    def first(self, kind: str, asset: str, tag: str) -> float | None:
        with self._lock:
            times = [d.at for d in self.deliveries.values() if (d.kind, d.asset, d.tag) == (kind, asset, tag)]
        return min(times) if times else None

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def subscribe(mongo: MongoClient[dict[str, Any]], database: str, tenant: str, url: str, secret: str) -> None:
    """In ``database`` (the bench tenant's own), not the control plane: see bench/outbound_child.py."""
    store = SubscriptionStore(mongo[database], sealer_for(load_settings(Settings)))
    filters = Filters(event_types=COUNTED)
    if store.create(tenant, HOOK, "webhook", {"url": url}, filters, {"key_id": "bench", "secret": secret}) is None:
        raise RuntimeError(f"subscription {tenant}/{HOOK} exists already")


def unsubscribe(mongo: MongoClient[dict[str, Any]], database: str, tenant: str) -> None:
    SubscriptionStore(mongo[database], sealer_for(load_settings(Settings))).delete(tenant, HOOK)


def _start_at_end(settings: Settings, group: str, topic: str) -> None:
    consumer = Consumer(consumer_config(settings, group))
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = [
            TopicPartition(topic, p, consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1])
            for p in partitions
        ]
        consumer.commit(offsets=ends, asynchronous=False)
    finally:
        consumer.close()


def _stable(settings: Settings, group: str) -> bool:
    admin = AdminClient(client_config(settings))
    description = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
    return bool(description.state == ConsumerGroupState.STABLE and description.members)


@contextmanager
def outbound_runtime(
    settings: Settings, tenant: str, subscriptions_db: str, log: Path, timeout_s: float
) -> Iterator[subprocess.Popen[bytes]]:
    """The runtime with consumer groups of its own, positioned at the end of its topics; yields once its main
    consumer group is stable (it holds the partitions of ``metalake.changes``)."""
    group, retry_group = f"bench-outbound-{tenant}", f"bench-outbound-retry-{tenant}"
    retry, dlq = retry_topic("outbound"), dlq_topic("outbound")
    ensure_topics(settings, [CHANGES_TOPIC, retry, dlq])
    _start_at_end(settings, group, CHANGES_TOPIC)
    _start_at_end(settings, retry_group, retry)
    env = {
        **os.environ,
        "METALAKE_OUTBOUND__GROUP_ID": group,
        "METALAKE_OUTBOUND__RETRY_GROUP_ID": retry_group,
        # The receiver listens on loopback, which the SSRF guard refuses by default: allowed for this process only.
        "METALAKE_OUTBOUND__SSRF_ALLOW": json.dumps(["127.0.0.0/8"]),
        "METALAKE_TELEMETRY__LOG_LEVEL": "INFO",
    }
    with log.open("ab") as out:
        cmd = [sys.executable, str(Path(__file__).with_name("outbound_child.py")), "--tenant", tenant]
        cmd += ["--subscriptions-db", subscriptions_db]
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + timeout_s
        while not _stable(settings, group):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the outbound runtime did not join its group; see {log}")
            time.sleep(1)
        yield proc
    finally:
        terminate(proc)


def terminate(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the processors stop after their batch), then SIGKILL if it takes more than a minute."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def new_secret() -> str:
    return secrets.token_hex(24)
