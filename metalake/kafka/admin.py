"""Idempotent topic creation, and topic configuration kept as declared."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from metalake.kafka.config import client_config
from metalake.settings import KernelSettings


def ensure_topics(
    settings: KernelSettings,
    topics: Sequence[str],
    *,
    partitions: int | None = None,
    config: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> list[str]:
    """Create the topics that do not exist yet (``kafka.topic_replication_factor`` replicas, ``min.insync.replicas``
    from ``kafka.topic_min_insync_replicas`` unless ``config`` sets it); return the names created."""
    admin = AdminClient(client_config(settings))
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    wanted = [t for t in topics if t not in existing]
    if not wanted:
        return []
    futures = admin.create_topics(
        [
            NewTopic(
                t,
                num_partitions=partitions or settings.kafka.topic_partitions,
                replication_factor=settings.kafka.topic_replication_factor,
                config={"min.insync.replicas": str(settings.kafka.topic_min_insync_replicas), **(config or {})},
            )
            for t in wanted
        ],
        operation_timeout=timeout_s,
    )
    created = []
    for topic, future in futures.items():
        try:
            future.result(timeout=timeout_s)
            created.append(topic)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    return created


def ensure_topic_config(
    settings: KernelSettings, topic: str, config: Mapping[str, str], *, timeout_s: float = 30.0
) -> None:
    """Set ``config`` on an existing topic (incrementally: other settings stay), so a topic created before a setting
    was declared gets it too. Raises :class:`KafkaException` if the broker refuses."""
    admin = AdminClient(client_config(settings))
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in config.items()]
    futures = admin.incremental_alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)]
    )
    for future in futures.values():
        future.result(timeout=timeout_s)
