"""Kafka client security from settings: librdkafka's keys, the Java client's (the Spark source's ``kafka.`` options),
the settings' own checks, and no secret in any repr, error or description."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from metalake.kafka.config import (
    JAVA_OAUTH_ALLOWED_URLS,
    JAVA_OAUTH_CALLBACK,
    client_config,
    consumer_config,
    describe,
    java_security_options,
    java_system_properties,
    producer_config,
    security_config,
    spark_kafka_options,
)
from metalake.settings import KafkaSettings
from ops.settings import Settings

PASSWORD = 's3cr3t-"quoted"-\\back'
CLIENT_SECRET = "oidc-client-secret-value"


def _scram(**extra: Any) -> KafkaSettings:
    return KafkaSettings(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="metalake",
        sasl_password=SecretStr(PASSWORD),
        ssl_ca_location=Path("/etc/kafka/ca.pem"),
        **extra,
    )


def _oauth() -> KafkaSettings:
    return KafkaSettings(
        security_protocol="SASL_SSL",
        sasl_mechanism="OAUTHBEARER",
        oauth_token_endpoint_url="https://idp.example/oauth2/token",
        oauth_client_id="metalake-stream",
        oauth_client_secret=SecretStr(CLIENT_SECRET),
        oauth_scope="kafka",
    )


def test_plaintext_adds_no_security_key() -> None:
    kafka = KafkaSettings()
    assert security_config(kafka) == {} and java_security_options(kafka) == {} and java_system_properties(kafka) == {}
    settings = Settings(kafka=kafka)
    assert "security.protocol" not in client_config(settings)
    assert spark_kafka_options(settings) == {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_scram_over_tls_for_librdkafka() -> None:
    assert security_config(_scram()) == {
        "security.protocol": "sasl_ssl",
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.ca.location": "/etc/kafka/ca.pem",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "metalake",
        "sasl.password": PASSWORD,
    }


def test_every_librdkafka_client_gets_the_security_keys() -> None:
    settings = Settings(kafka=_scram())
    for config in (client_config(settings), producer_config(settings), consumer_config(settings, "g")):
        assert config["security.protocol"] == "sasl_ssl" and config["sasl.password"] == PASSWORD


def test_scram_over_tls_for_the_java_client_quotes_the_jaas_values() -> None:
    assert java_security_options(_scram()) == {
        "security.protocol": "SASL_SSL",
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/kafka/ca.pem",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="metalake" '
        'password="s3cr3t-\\"quoted\\"-\\\\back";',
    }


def test_the_spark_source_options_are_prefixed() -> None:
    options = spark_kafka_options(Settings(kafka=_scram(bootstrap_servers="b1:9094,b2:9094")))
    assert options["kafka.bootstrap.servers"] == "b1:9094,b2:9094"
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.jaas.config"].startswith("org.apache.kafka.common.security.scram.ScramLoginModule")
    assert all(key.startswith("kafka.") for key in options)


def test_plain_mechanism_uses_the_plain_login_module() -> None:
    kafka = _scram().model_copy(update={"sasl_mechanism": "PLAIN", "security_protocol": "SASL_PLAINTEXT"})
    options = java_security_options(kafka)
    assert options["sasl.jaas.config"].startswith("org.apache.kafka.common.security.plain.PlainLoginModule required")
    assert "ssl.truststore.location" not in options  # no TLS on SASL_PLAINTEXT
    assert security_config(kafka)["security.protocol"] == "sasl_plaintext"


def test_mutual_tls_client_certificate() -> None:
    kafka = KafkaSettings(
        security_protocol="SSL",
        ssl_ca_location=Path("/ca.pem"),
        ssl_certificate_location=Path("/client.pem"),
        ssl_key_location=Path("/client.pem"),
        ssl_key_password=SecretStr("keypass"),
    )
    assert security_config(kafka) == {
        "security.protocol": "ssl",
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/client.pem",
        "ssl.key.location": "/client.pem",
        "ssl.key.password": "keypass",
    }
    java = java_security_options(kafka)
    assert (java["ssl.keystore.type"], java["ssl.keystore.location"], java["ssl.key.password"]) == (
        "PEM",
        "/client.pem",
        "keypass",
    )
    assert "sasl.mechanism" not in java


def test_oauthbearer_through_oidc_for_librdkafka() -> None:
    assert security_config(_oauth()) == {
        "security.protocol": "sasl_ssl",
        "ssl.endpoint.identification.algorithm": "https",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/oauth2/token",
        "sasl.oauthbearer.client.id": "metalake-stream",
        "sasl.oauthbearer.client.secret": CLIENT_SECRET,
        "sasl.oauthbearer.scope": "kafka",
    }


def test_oauthbearer_through_oidc_for_the_java_client_and_its_allowed_url() -> None:
    java = java_security_options(_oauth())
    assert java["sasl.login.callback.handler.class"] == JAVA_OAUTH_CALLBACK
    assert java["sasl.oauthbearer.token.endpoint.url"] == "https://idp.example/oauth2/token"
    assert java["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        f'clientId="metalake-stream" clientSecret="{CLIENT_SECRET}" scope="kafka";'
    )
    # Kafka 4.x clients refuse any token endpoint this JVM property does not list.
    assert java_system_properties(_oauth()) == {JAVA_OAUTH_ALLOWED_URLS: "https://idp.example/oauth2/token"}


def test_no_secret_in_repr_or_description() -> None:
    for kafka in (_scram(), _oauth()):
        for text in (repr(kafka), str(kafka), repr(Settings(kafka=kafka)), str(describe(kafka))):
            assert PASSWORD not in text and CLIENT_SECRET not in text
    assert describe(_scram()) == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "principal": "metalake",
    }
    assert describe(_oauth())["principal"] == "metalake-stream"


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"security_protocol": "SASL_SSL"}, "kafka.sasl_username, kafka.sasl_password"),
        ({"security_protocol": "SASL_SSL", "sasl_username": "u"}, "kafka.sasl_password"),
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "oauth_client_id": "c"},
            "kafka.oauth_token_endpoint_url, kafka.oauth_client_secret",
        ),
        ({"topic_replication_factor": 1, "topic_min_insync_replicas": 2}, "kafka.topic_min_insync_replicas"),
    ],
)
def test_incomplete_settings_name_what_is_missing(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(ValidationError, match=named):
        KafkaSettings(**kwargs)


def test_a_refused_setting_does_not_echo_the_password() -> None:
    with pytest.raises(ValidationError) as err:
        KafkaSettings(security_protocol="SASL_SSL", sasl_password=SecretStr(PASSWORD))
    assert PASSWORD not in str(err.value)


def test_replication_settings_default_to_one_broker() -> None:
    kafka = KafkaSettings()
    assert (kafka.topic_replication_factor, kafka.topic_min_insync_replicas) == (1, 1)
    assert KafkaSettings(topic_replication_factor=3, topic_min_insync_replicas=2).topic_min_insync_replicas == 2
