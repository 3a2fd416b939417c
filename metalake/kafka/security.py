"""Authentication and TLS failures of Kafka clients, told apart and named by the setting at fault.

librdkafka reports a refused password or an untrusted certificate as a transport error of the broker ("all brokers
down") unless the client reads its error callback: every client built by ``metalake.kafka.config`` gets
:func:`error_callback`, which logs the first such failure once, with the setting to fix and never a secret.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from confluent_kafka import KafkaError

from metalake.settings import KafkaSettings

log = logging.getLogger(__name__)

# librdkafka's local error codes (confluent-kafka exposes them with a leading underscore).
_AUTHENTICATION = KafkaError._AUTHENTICATION  # noqa: SLF001
_SSL = KafkaError._SSL  # noqa: SLF001


class KafkaSecurityError(RuntimeError):
    """The broker refused this client's credentials or TLS; ``setting`` names what to check."""

    def __init__(self, message: str, setting: str) -> None:
        super().__init__(message)
        self.setting = setting


class KafkaAuthenticationFailed(KafkaSecurityError):
    """SASL authentication refused (password, mechanism, OAUTHBEARER token)."""


class KafkaTlsFailed(KafkaSecurityError):
    """The TLS handshake failed (the broker's certificate not trusted, or the client's refused)."""


def security_error(kafka: KafkaSettings, error: KafkaError) -> KafkaSecurityError | None:
    """The failure ``error`` stands for, if it is one of authentication or TLS; None for any other error."""
    # librdkafka's text names the broker and the reason (never the password): kept after the setting to check.
    reason = error.str()
    if error.code() == _AUTHENTICATION:
        if kafka.sasl_mechanism == "OAUTHBEARER":
            return KafkaAuthenticationFailed(
                f"Kafka refused the OAUTHBEARER login of kafka.oauth_client_id={kafka.oauth_client_id!r}: check "
                f"kafka.oauth_client_secret, kafka.oauth_token_endpoint_url and kafka.oauth_scope ({reason})",
                "kafka.oauth_client_secret",
            )
        if "mechanism" in reason.lower() and "unsupported" in reason.lower():
            return KafkaAuthenticationFailed(
                f"the broker does not offer kafka.sasl_mechanism={kafka.sasl_mechanism} ({reason})",
                "kafka.sasl_mechanism",
            )
        return KafkaAuthenticationFailed(
            f"Kafka refused the credentials of kafka.sasl_username={kafka.sasl_username!r} "
            f"({kafka.sasl_mechanism}): check kafka.sasl_password ({reason})",
            "kafka.sasl_password",
        )
    if error.code() == _SSL:
        if "verify" in reason.lower():
            trusted = str(kafka.ssl_ca_location) if kafka.ssl_ca_location else "the system trust store"
            return KafkaTlsFailed(
                f"the broker's TLS certificate is not trusted: kafka.ssl_ca_location ({trusted}) must hold the CA "
                f"that signed it, and the certificate name the host in kafka.bootstrap_servers ({reason})",
                "kafka.ssl_ca_location",
            )
        return KafkaTlsFailed(
            f"the TLS handshake with the broker failed with kafka.security_protocol={kafka.security_protocol}: "
            f"check kafka.ssl_ca_location and the client certificate settings ({reason})",
            "kafka.ssl_ca_location",
        )
    return None


# The Java client's (the Spark source's) exceptions for the same failures, and the setting each points at.
_JAVA_FAILURES = (
    ("SaslAuthenticationException", "kafka.sasl_password"),
    ("UnsupportedSaslMechanismException", "kafka.sasl_mechanism"),
    ("PKIX path building failed", "kafka.ssl_ca_location"),
    ("SSLHandshakeException", "kafka.ssl_ca_location"),
)


def java_failure_setting(error_text: str) -> str | None:
    """The setting at fault when a Java Kafka client's error (a failed Spark query's text) is an authentication or
    TLS failure; None otherwise."""
    for marker, setting in _JAVA_FAILURES:
        if marker in error_text:
            return setting
    return None


def error_callback(kafka: KafkaSettings) -> Callable[[KafkaError], None]:
    """A librdkafka ``error_cb`` that logs the first authentication or TLS failure of its client (librdkafka retries
    on every reconnect: once is enough to name the setting; other errors librdkafka logs itself)."""
    told: list[str] = []

    def on_error(error: KafkaError) -> None:
        failure = security_error(kafka, error)
        if failure is None or told:
            return
        told.append(failure.setting)
        log.error("kafka.security_error", extra={"setting": failure.setting, "error": str(failure)})

    return on_error
