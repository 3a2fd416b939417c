"""The outbound runtime as a subprocess (so tests can kill -9 it), with its consumer groups starting at the end of
the topics (a fresh group would otherwise read the whole shared changes topic)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from metalake.kafka import ensure_topics
from metalake.kafka.config import consumer_config
from ops.settings import Settings
from tenants.naming import CHANGES_TOPIC, OUTBOUND_TESTS_TOPIC, dlq_topic, retry_topic

RETRY = retry_topic("outbound")
DLQ = dlq_topic("outbound")
# What the runtime's main consumer group reads: the changes and the subscriptions' test sends.
MAIN_TOPICS = (CHANGES_TOPIC, OUTBOUND_TESTS_TOPIC)


def start_groups_at_end(settings: Settings, groups: dict[str, str | Sequence[str]]) -> None:
    """Commit, for each ``group -> topic(s)``, the topics' current end offsets."""
    ensure_topics(settings, [*MAIN_TOPICS, RETRY, DLQ])
    for group, topics in groups.items():
        consumer = Consumer(consumer_config(settings, group))
        try:
            offsets = []
            for topic in [topics] if isinstance(topics, str) else topics:
                meta = consumer.list_topics(topic, timeout=10)
                for partition in meta.topics[topic].partitions:
                    _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
                    offsets.append(TopicPartition(topic, partition, high))
            _commit(consumer, offsets)
        finally:
            consumer.close()


_COORDINATOR_NOT_READY = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
)


def _commit(consumer: Consumer, offsets: list[TopicPartition], timeout_s: float = 60) -> None:
    # A broker that just started has no group coordinator loaded yet (its first commits answer NOT_COORDINATOR or
    # COORDINATOR_LOAD_IN_PROGRESS until it is): the demo's test, first on a fresh stack, met it.
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            return
        except KafkaException as exc:
            if exc.args[0].code() not in _COORDINATOR_NOT_READY or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


class RuntimeProcess:
    def __init__(self, settings: Settings, log_path: Path, **outbound: Any) -> None:
        self.settings, self.log_path = settings, log_path
        self.env = {**os.environ, "METALAKE_TELEMETRY__LOG_LEVEL": "INFO"}
        for name, value in outbound.items():
            encoded = json.dumps(value) if isinstance(value, list | dict | bool) else str(value)
            self.env[f"METALAKE_OUTBOUND__{name.upper()}"] = encoded
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RuntimeProcess:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "processors.outbound", "run"], env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        return self

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=30)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


def commit_offsets(settings: Settings, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Position ``group`` at ``offsets`` (partition -> offset), e.g. marks taken before publishing, for a replay."""
    consumer = Consumer(consumer_config(settings, group))
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def caught_up(settings: Settings, group: str, topic: str) -> bool:
    """Whether ``group`` has committed every partition of ``topic`` up to its current end."""
    consumer = Consumer(consumer_config(settings, group))
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        committed = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
        for tp in committed:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=10)
            if tp.offset < high:
                return False
        return True
    finally:
        consumer.close()
