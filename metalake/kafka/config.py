"""librdkafka configuration derived from settings, in one place."""

from __future__ import annotations

from typing import Any

from metalake.settings import Settings


def client_config(settings: Settings, **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": settings.kafka_bootstrap,
        "client.id": settings.kafka.client_id,
        # Loopback stack: fail fast on a dead broker instead of librdkafka's long default reconnect backoff.
        "reconnect.backoff.max.ms": 2000,
        # Warnings and errors only: librdkafka's info lines (queue purges on close) are noise on stderr.
        "log_level": 4,
    }
    config.update(overrides)
    return config


def producer_config(settings: Settings, **overrides: Any) -> dict[str, Any]:
    return client_config(
        settings,
        **{
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "compression.type": "lz4",
            "delivery.timeout.ms": settings.kafka.delivery_timeout_ms,
            **overrides,
        },
    )


def consumer_config(settings: Settings, group_id: str, **overrides: Any) -> dict[str, Any]:
    return client_config(
        settings,
        **{
            "group.id": group_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            **overrides,
        },
    )
