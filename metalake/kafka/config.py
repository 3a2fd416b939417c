"""Kafka client configuration derived from settings, in one place: librdkafka's (producers, consumers, admin) and the
Java client's (the streaming job's Spark source, as ``kafka.``-prefixed options).

The security keys of both come from :class:`metalake.settings.KafkaSettings`; passwords and client secrets leave
their ``SecretStr`` only here, into the dicts handed to the clients, which are never logged (log
:func:`describe` instead).
"""

from __future__ import annotations

from typing import Any

from metalake.kafka.security import error_callback

# The Java client's login callback for OAUTHBEARER through an OIDC token endpoint (client credentials grant).
from metalake.settings import KafkaSettings, KernelSettings

# The Java client's login callback for OAUTHBEARER through an OIDC token endpoint (client credentials grant).
JAVA_OAUTH_CALLBACK = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
# Kafka's Java client (3.9.1+, enforced by 4.x) fetches tokens only from URLs this JVM system property lists.
JAVA_OAUTH_ALLOWED_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"


def security_config(kafka: KafkaSettings) -> dict[str, Any]:
    """librdkafka's TLS and SASL keys for ``kafka`` (empty for PLAINTEXT)."""
    protocol = kafka.security_protocol
    out: dict[str, Any] = {}
    if protocol == "PLAINTEXT":
        return out
    out["security.protocol"] = protocol.lower()
    if protocol in ("SSL", "SASL_SSL"):
        # Verify the broker's host name against its certificate (librdkafka's default since 2.0; stated so a
        # downgrade of the library cannot silently drop it).
        out["ssl.endpoint.identification.algorithm"] = "https"
        if kafka.ssl_ca_location is not None:
            out["ssl.ca.location"] = str(kafka.ssl_ca_location)
        if kafka.ssl_certificate_location is not None:
            out["ssl.certificate.location"] = str(kafka.ssl_certificate_location)
        if kafka.ssl_key_location is not None:
            out["ssl.key.location"] = str(kafka.ssl_key_location)
        if kafka.ssl_key_password is not None:
            out["ssl.key.password"] = kafka.ssl_key_password.get_secret_value()
    if protocol.startswith("SASL_"):
        out["sasl.mechanism"] = kafka.sasl_mechanism
        if kafka.sasl_mechanism == "OAUTHBEARER":
            out["sasl.oauthbearer.method"] = "oidc"
            out["sasl.oauthbearer.token.endpoint.url"] = kafka.oauth_token_endpoint_url
            out["sasl.oauthbearer.client.id"] = kafka.oauth_client_id
            out["sasl.oauthbearer.client.secret"] = _secret(kafka.oauth_client_secret)
            if kafka.oauth_scope:
                out["sasl.oauthbearer.scope"] = kafka.oauth_scope
        else:
            out["sasl.username"] = kafka.sasl_username
            out["sasl.password"] = _secret(kafka.sasl_password)
    return out


def java_security_options(kafka: KafkaSettings) -> dict[str, str]:
    """The Java client's TLS and SASL keys for ``kafka`` (unprefixed; the Spark source wants them as ``kafka.<key>``).
    Certificates stay PEM files (``ssl.*.type=PEM``): no keystore to build."""
    protocol = kafka.security_protocol
    out: dict[str, str] = {}
    if protocol == "PLAINTEXT":
        return out
    out["security.protocol"] = protocol
    if protocol in ("SSL", "SASL_SSL"):
        out["ssl.endpoint.identification.algorithm"] = "https"
        if kafka.ssl_ca_location is not None:
            out["ssl.truststore.type"] = "PEM"
            out["ssl.truststore.location"] = str(kafka.ssl_ca_location)
        key = kafka.ssl_key_location or kafka.ssl_certificate_location
        if key is not None:
            out["ssl.keystore.type"] = "PEM"
            out["ssl.keystore.location"] = str(key)
            if kafka.ssl_key_password is not None:
                out["ssl.key.password"] = kafka.ssl_key_password.get_secret_value()
    if protocol.startswith("SASL_"):
        out["sasl.mechanism"] = kafka.sasl_mechanism
        if kafka.sasl_mechanism == "OAUTHBEARER":
            out["sasl.login.callback.handler.class"] = JAVA_OAUTH_CALLBACK
            out["sasl.oauthbearer.token.endpoint.url"] = str(kafka.oauth_token_endpoint_url)
            options = {"clientId": kafka.oauth_client_id, "clientSecret": _secret(kafka.oauth_client_secret)}
            if kafka.oauth_scope:
                options["scope"] = kafka.oauth_scope
            out["sasl.jaas.config"] = _jaas(
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule", options
            )
        else:
            module = (
                "org.apache.kafka.common.security.plain.PlainLoginModule"
                if kafka.sasl_mechanism == "PLAIN"
                else "org.apache.kafka.common.security.scram.ScramLoginModule"
            )
            out["sasl.jaas.config"] = _jaas(
                module, {"username": kafka.sasl_username, "password": _secret(kafka.sasl_password)}
            )
    return out


def java_system_properties(kafka: KafkaSettings) -> dict[str, str]:
    """JVM system properties the Java client needs (the OIDC token endpoint allowed, for OAUTHBEARER)."""
    if kafka.security_protocol.startswith("SASL_") and kafka.sasl_mechanism == "OAUTHBEARER":
        return {JAVA_OAUTH_ALLOWED_URLS: str(kafka.oauth_token_endpoint_url)}
    return {}


def describe(kafka: KafkaSettings) -> dict[str, Any]:
    """What a log line may say about the client's security: the protocol, mechanism and user, never a secret."""
    out: dict[str, Any] = {"security_protocol": kafka.security_protocol}
    if kafka.security_protocol.startswith("SASL_"):
        out["sasl_mechanism"] = kafka.sasl_mechanism
        out["principal"] = kafka.oauth_client_id if kafka.sasl_mechanism == "OAUTHBEARER" else kafka.sasl_username
    return out


def _secret(value: Any) -> str:  # noqa: ANN401
    # The settings' validator already refused a SASL protocol without its secret: None cannot reach here in practice.
    return "" if value is None else str(value.get_secret_value())


def _jaas(module: str, options: dict[str, str | None]) -> str:
    """A JAAS line; values quoted, with backslash and double quote escaped (Kafka's JAAS parser reads them so)."""
    parts = [module, "required"]
    for name, value in options.items():
        escaped = (value or "").replace("\\", "\\\\").replace('"', '\\"')
        parts.append(f'{name}="{escaped}"')
    return " ".join(parts) + ";"


def client_config(settings: KernelSettings, **overrides: Any) -> dict[str, Any]:  # noqa: ANN401
    config: dict[str, Any] = {
        "bootstrap.servers": settings.kafka_bootstrap,
        "client.id": settings.kafka.client_id,
        # Loopback stack: fail fast on a dead broker instead of librdkafka's long default reconnect backoff.
        "reconnect.backoff.max.ms": 2000,
        # Warnings and errors only: librdkafka's info lines (queue purges on close) are noise on stderr.
        "log_level": 4,
        **security_config(settings.kafka),
    }
    if settings.kafka.security_protocol != "PLAINTEXT":
        # A refused password or untrusted certificate would otherwise read as "all brokers down".
        config["error_cb"] = error_callback(settings.kafka)
    config.update(overrides)
    return config


def producer_config(settings: KernelSettings, **overrides: Any) -> dict[str, Any]:  # noqa: ANN401
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


def consumer_config(settings: KernelSettings, group_id: str, **overrides: Any) -> dict[str, Any]:  # noqa: ANN401
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


def spark_kafka_options(settings: KernelSettings) -> dict[str, str]:
    """The Spark Kafka source's (and sink's) ``kafka.``-prefixed options: the brokers and the security keys."""
    options = {"bootstrap.servers": settings.kafka_bootstrap, **java_security_options(settings.kafka)}
    return {f"kafka.{key}": value for key, value in options.items()}
