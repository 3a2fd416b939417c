"""Topic creation takes the replication factor and min.insync.replicas from settings (no broker: a recording admin)."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from confluent_kafka.admin import NewTopic

from metalake.kafka import admin as admin_module
from metalake.kafka.admin import ensure_topics
from metalake.settings import KafkaSettings
from ops.settings import Settings


class _Admin:
    created: ClassVar[list[NewTopic]] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    def list_topics(self, timeout: float) -> SimpleNamespace:
        return SimpleNamespace(topics={"exists": None})

    def create_topics(self, topics: list[NewTopic], operation_timeout: float) -> dict[str, Future[None]]:
        _Admin.created = topics
        out: dict[str, Future[None]] = {}
        for t in topics:
            out[t.topic] = Future()
            out[t.topic].set_result(None)
        return out


@pytest.fixture(autouse=True)
def recording_admin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_module, "AdminClient", _Admin)


def test_topics_get_the_configured_replication_and_min_isr() -> None:
    settings = Settings(kafka=KafkaSettings(topic_replication_factor=3, topic_min_insync_replicas=2))
    assert ensure_topics(settings, ["a", "exists"], config={"cleanup.policy": "compact"}) == ["a"]
    (topic,) = _Admin.created
    assert (topic.topic, topic.replication_factor) == ("a", 3)
    assert topic.config == {"min.insync.replicas": "2", "cleanup.policy": "compact"}


def test_defaults_suit_one_broker_and_a_topic_may_set_its_own_min_isr() -> None:
    ensure_topics(Settings(), ["b"], config={"min.insync.replicas": "1"})
    (topic,) = _Admin.created
    assert (topic.replication_factor, topic.config) == (1, {"min.insync.replicas": "1"})
