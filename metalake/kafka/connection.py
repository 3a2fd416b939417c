"""Whether this process can reach Kafka with its own configuration, and if not, which setting is at fault: the
readiness probe's Kafka check (``metalake.http.health``) and a command's check at its start."""

from __future__ import annotations

import threading

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from metalake.kafka.config import client_config
from metalake.kafka.security import security_error
from metalake.settings import KernelSettings

# librdkafka's local error code (confluent-kafka exposes it with a leading underscore).
_TRANSPORT = KafkaError._TRANSPORT  # noqa: SLF001


class ConnectionCheck:
    """A metadata request with the process's own configuration, on one admin client opened at the first call and
    kept (a readiness probe runs every few seconds). A call returns if a broker answers, raises
    :class:`KafkaSecurityError` (naming the setting) if the broker refused this client, else the client's error."""

    def __init__(self, settings: KernelSettings) -> None:
        self._settings = settings
        self._errors: list[KafkaError] = []
        self._lock = threading.Lock()
        self._admin: AdminClient | None = None

    def __call__(self, timeout_s: float) -> None:
        with self._lock:
            if self._admin is None:
                # Quiet: a probe of a broker that is down would print librdkafka's reconnect errors every few
                # seconds; the process's own clients already log them.
                self._admin = AdminClient(client_config(self._settings, error_cb=self._errors.append, log_level=0))
            admin = self._admin
        try:
            if admin.list_topics(timeout=timeout_s).brokers:
                self._errors.clear()
                return
            failure = KafkaException(KafkaError(_TRANSPORT, "no broker in the metadata"))
        except KafkaException as exc:
            failure = exc
        admin.poll(0)  # serve the error callbacks queued meanwhile
        errors, self._errors[:] = list(self._errors), []
        for error in errors:
            refused = security_error(self._settings.kafka, error)
            if refused is not None:
                raise refused from None
        raise failure


def check_connection(settings: KernelSettings, timeout_s: float = 10.0) -> None:
    """:class:`ConnectionCheck` once (a command's start, a test)."""
    ConnectionCheck(settings)(timeout_s)
