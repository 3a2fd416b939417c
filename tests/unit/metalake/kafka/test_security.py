"""Authentication and TLS failures named by the setting at fault, logged once, without a secret (librdkafka's own
error texts, as a SASL_SSL broker produced them)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from pydantic import SecretStr

from metalake.kafka.config import client_config
from metalake.kafka.security import (
    KafkaAuthenticationFailed,
    KafkaTlsFailed,
    error_callback,
    java_failure_setting,
    security_error,
)
from metalake.settings import KafkaSettings
from ops.settings import Settings

PASSWORD = "never-in-a-message-0123"
AUTH = KafkaError(
    KafkaError._AUTHENTICATION,
    "sasl_ssl://127.0.0.1:19094/bootstrap: SASL authentication error: Authentication failed during authentication due "
    "to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 327ms in state AUTH_REQ)",
)
MECHANISM = KafkaError(
    KafkaError._AUTHENTICATION,
    "sasl_ssl://127.0.0.1:19094/bootstrap: SASL PLAIN mechanism handshake failed: Broker: Unsupported SASL mechanism: "
    "broker's supported mechanisms: SCRAM-SHA-512,SCRAM-SHA-256 (after 302ms in state AUTH_HANDSHAKE)",
)
UNTRUSTED = KafkaError(
    KafkaError._SSL,
    "sasl_ssl://127.0.0.1:19094/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify "
    "failed: broker certificate could not be verified (after 7ms in state SSL_HANDSHAKE)",
)
DOWN = KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down")


def _kafka(**extra: object) -> KafkaSettings:
    values: dict[str, object] = {
        "security_protocol": "SASL_SSL",
        "sasl_username": "metalake",
        "sasl_password": SecretStr(PASSWORD),
        "ssl_ca_location": Path("/etc/kafka/ca.pem"),
        **extra,
    }
    return KafkaSettings.model_validate(values)


def test_a_refused_password_names_kafka_sasl_password() -> None:
    failure = security_error(_kafka(), AUTH)
    assert isinstance(failure, KafkaAuthenticationFailed) and failure.setting == "kafka.sasl_password"
    assert "kafka.sasl_username='metalake'" in str(failure) and PASSWORD not in str(failure)


def test_an_unoffered_mechanism_names_kafka_sasl_mechanism() -> None:
    failure = security_error(_kafka(sasl_mechanism="PLAIN"), MECHANISM)
    assert isinstance(failure, KafkaAuthenticationFailed) and failure.setting == "kafka.sasl_mechanism"


def test_an_untrusted_certificate_names_kafka_ssl_ca_location() -> None:
    failure = security_error(_kafka(), UNTRUSTED)
    assert isinstance(failure, KafkaTlsFailed) and failure.setting == "kafka.ssl_ca_location"
    assert "/etc/kafka/ca.pem" in str(failure)
    no_ca = security_error(_kafka(ssl_ca_location=None), UNTRUSTED)
    assert no_ca is not None and "the system trust store" in str(no_ca)


def test_a_refused_oauth_login_names_the_client_secret() -> None:
    kafka = KafkaSettings(
        security_protocol="SASL_SSL",
        sasl_mechanism="OAUTHBEARER",
        oauth_token_endpoint_url="https://idp.example/token",
        oauth_client_id="stream",
        oauth_client_secret=SecretStr(PASSWORD),
    )
    failure = security_error(kafka, AUTH)
    assert failure is not None and failure.setting == "kafka.oauth_client_secret" and PASSWORD not in str(failure)


def test_other_errors_are_not_security_errors() -> None:
    assert security_error(_kafka(), DOWN) is None


def test_the_callback_logs_the_first_failure_once(caplog: pytest.LogCaptureFixture) -> None:
    on_error = error_callback(_kafka())
    with caplog.at_level(logging.ERROR, logger="metalake.kafka.security"):
        for error in (DOWN, AUTH, AUTH, UNTRUSTED):
            on_error(error)
    (record,) = caplog.records
    assert record.getMessage() == "kafka.security_error" and record.__dict__["setting"] == "kafka.sasl_password"
    assert PASSWORD not in caplog.text and PASSWORD not in str(record.__dict__)


def test_secured_clients_get_the_callback_plaintext_ones_do_not() -> None:
    assert callable(client_config(Settings(kafka=_kafka()))["error_cb"])
    assert "error_cb" not in client_config(Settings())


def test_the_java_clients_failures_point_at_the_setting() -> None:
    # As the Spark source's query fails (texts of the Java client 3.9 against the local SASL_SSL broker).
    refused = (
        "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.SaslAuthenticationException: "
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
    )
    untrusted = (
        "org.apache.kafka.common.errors.SslAuthenticationException: SSL handshake failed\nCaused by: "
        "javax.net.ssl.SSLHandshakeException: PKIX path building failed: unable to find valid certification path"
    )
    assert java_failure_setting(refused) == "kafka.sasl_password"
    assert java_failure_setting(untrusted) == "kafka.ssl_ca_location"
    assert java_failure_setting("org.apache.kafka.common.errors.TimeoutException: Timed out") is None
