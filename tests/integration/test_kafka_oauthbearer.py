"""Kafka clients authenticated with OAUTHBEARER tokens of the API's own issuer, end to end.

A broker whose SASL_SSL listener validates tokens against the API's JWKS (issuer and audience checked:
tests/_support/oauth_broker.py says why it is a broker of its own). metalake's librdkafka clients (admin, producer,
consumer: ``sasl.oauthbearer.method=oidc``) and the Java client (the mapping the Spark source uses, driven through
Kafka's own ConfigCommand) get their tokens from the real ``POST /oauth/token`` with client credentials and are let in;
a wrong client secret fails naming the setting, never the secret; a forged token, an expired one of the real
issuer and an unsigned one are refused by the broker. The streaming job's Spark Kafka source and sink (its session
builder and its options, kafka-clients 3.9 inside Spark) read and write through the same listener, as a batch and as
an ``availableNow`` stream, in a Spark process of its own (tests/_support/spark_kafka.py), and a forged client secret
is refused at the token endpoint.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from joserfc import jwt
from joserfc.jwk import RSAKey
from pydantic import SecretStr
from pymongo import MongoClient

from api.auth.keys import SigningKeyStore
from control.auth.clients import ClientStore, Role
from metalake.http.health import kafka_check, run_checks
from metalake.java import find_java
from metalake.kafka import ensure_topics
from metalake.kafka.config import (
    client_config,
    consumer_config,
    java_security_options,
    java_system_properties,
    producer_config,
)
from metalake.kafka.connection import check_connection
from metalake.kafka.security import KafkaAuthenticationFailed
from ops.settings import Settings
from ops.stack.manager import StackManager
from ops.stack.services.kafka import certificate
from tenants.naming import CONTROL_DATABASE
from tests._support.jwt_forge import b64, claims
from tests._support.oauth_broker import OAuthBroker, oauth_broker

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

Mongo = MongoClient[dict[str, Any]]


@pytest.fixture(scope="module")
def broker(settings: Settings, stack: StackManager, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthBroker]:
    issuer = settings.api.issuer_url
    with oauth_broker(
        stack.context,
        tmp_path_factory.mktemp("oauth-broker"),
        jwks_url=f"{issuer}/.well-known/jwks.json",
        issuer=issuer,
        audience=settings.api.audience,
    ) as running:
        yield running


@pytest.fixture(scope="module")
def client_secret(mongo: Mongo) -> tuple[str, str]:
    """A client of the API's issuer for Kafka alone: a tenant's read-only client (least power on the API's side; the
    broker's ACLs, keyed by the client id, decide what it may do in Kafka)."""
    record, secret = ClientStore(mongo[CONTROL_DATABASE]).create(
        f"it-{uuid.uuid4().hex[:8]}", Role.READ_ONLY, "kafka-oauthbearer-tests"
    )
    return record.client_id, secret


@pytest.fixture(scope="module")
def oauth(settings: Settings, stack: StackManager, broker: OAuthBroker, client_secret: tuple[str, str]) -> Settings:
    client_id, secret = client_secret
    kafka = settings.kafka.model_copy(
        update={
            "bootstrap_servers": broker.bootstrap,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "OAUTHBEARER",
            "ssl_ca_location": certificate(stack.context).ca,
            "oauth_token_endpoint_url": f"{settings.api.issuer_url}/oauth/token",
            "oauth_client_id": client_id,
            "oauth_client_secret": SecretStr(secret),
            "oauth_scope": "tenant:read",
        }
    )
    return settings.model_copy(update={"kafka": kafka})


def _consume(settings: Settings, topic: str, count: int) -> list[tuple[bytes, bytes]]:
    consumer = Consumer(
        consumer_config(settings, f"it-oauth-{uuid.uuid4().hex[:6]}", **{"auto.offset.reset": "earliest"})
    )
    try:
        consumer.subscribe([topic])
        got: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append((msg.key() or b"", msg.value() or b""))
        return got
    finally:
        consumer.close()


def test_librdkafka_clients_authenticate_with_the_apis_tokens(oauth: Settings, broker: OAuthBroker) -> None:
    check_connection(oauth, timeout_s=20)
    topic = f"it-oauth-{uuid.uuid4().hex[:8]}"
    assert ensure_topics(oauth, [topic]) == [topic]  # the admin client
    producer = Producer(producer_config(oauth))
    values = [f"v{i}".encode() for i in range(3)]
    for value in values:
        # One key: the topic has several partitions and only a partition keeps order.
        producer.produce(topic, value, key=b"oauth")
    assert producer.flush(30) == 0, broker.tail()
    assert [value for _key, value in _consume(oauth, topic, len(values))] == values


def test_the_java_client_authenticates_with_the_mapping_the_spark_source_uses(
    oauth: Settings, stack: StackManager, tmp_path: Path
) -> None:
    topic = f"it-oauth-java-{uuid.uuid4().hex[:8]}"
    assert ensure_topics(oauth, [topic]) == [topic]
    props = tmp_path / "client.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in java_security_options(oauth.kafka).items()))
    props.chmod(0o600)
    java = str(find_java(17, env_var="METALAKE_KAFKA_JAVA_HOME"))
    argv = [java, *(f"-D{k}={v}" for k, v in java_system_properties(oauth.kafka).items())]
    argv += ["-cp", str(stack.context.cache_dir("kafka") / "libs" / "*"), "kafka.admin.ConfigCommand"]
    argv += ["--bootstrap-server", str(oauth.kafka.bootstrap_servers), "--command-config", str(props)]
    result = subprocess.run(
        [*argv, "--describe", "--entity-type", "topics", "--entity-name", topic],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert f"Dynamic configs for topic {topic} are" in result.stdout
    assert oauth.kafka.oauth_client_secret is not None
    assert oauth.kafka.oauth_client_secret.get_secret_value() not in output


def test_a_wrong_client_secret_fails_naming_the_setting(oauth: Settings) -> None:
    secret = "mls_not-the-secret-0123456789abcdef"
    kafka = oauth.kafka.model_copy(update={"oauth_client_secret": SecretStr(secret)})
    wrong = oauth.model_copy(update={"kafka": kafka})
    with pytest.raises(KafkaAuthenticationFailed) as err:
        check_connection(wrong, timeout_s=5)
    assert err.value.setting == "kafka.oauth_client_secret" and secret not in str(err.value)
    assert run_checks({"kafka": kafka_check(wrong, 5)}, 10) == {"kafka": "down: KafkaAuthenticationFailed"}


def test_the_spark_kafka_source_and_sink_authenticate_with_the_jobs_options(
    oauth: Settings, broker: OAuthBroker, tmp_path: Path
) -> None:
    """The job's session (``build_spark``) and source options (``spark_kafka_options``) in a Spark process of its
    own (tests/_support/spark_kafka.py): the batch source reads what librdkafka produced, the batch sink and an
    ``availableNow`` stream (the job's ``readStream``) write to two more topics that librdkafka then reads, and a
    forged client secret is refused at the token endpoint."""
    topics = [f"it-oauth-spark-{name}-{uuid.uuid4().hex[:8]}" for name in ("in", "batch", "stream")]
    assert ensure_topics(oauth, topics) == topics
    source, batch_sink, stream_sink = topics
    producer = Producer(producer_config(oauth))
    values = [f"spark-{i}" for i in range(3)]
    for value in values:
        producer.produce(source, value.encode(), key=b"spark")  # one key: one partition, read in order
    assert producer.flush(30) == 0, broker.tail()
    kafka = oauth.kafka
    assert kafka.oauth_client_secret is not None
    secret = kafka.oauth_client_secret.get_secret_value()
    forged = "mls_forged-0123456789abcdef0123456789"
    env = {
        **os.environ,
        # The worktree's code first (a child started with -m imports from its working directory and PYTHONPATH).
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "METALAKE_KAFKA__BOOTSTRAP_SERVERS": str(kafka.bootstrap_servers),
        "METALAKE_KAFKA__SECURITY_PROTOCOL": kafka.security_protocol,
        "METALAKE_KAFKA__SASL_MECHANISM": kafka.sasl_mechanism,
        "METALAKE_KAFKA__SSL_CA_LOCATION": str(kafka.ssl_ca_location),
        "METALAKE_KAFKA__OAUTH_TOKEN_ENDPOINT_URL": str(kafka.oauth_token_endpoint_url),
        "METALAKE_KAFKA__OAUTH_CLIENT_ID": str(kafka.oauth_client_id),
        "METALAKE_KAFKA__OAUTH_CLIENT_SECRET": secret,
        "METALAKE_KAFKA__OAUTH_SCOPE": str(kafka.oauth_scope),
        # One small local session with scratch space of its own (not the stack's job's).
        "METALAKE_SPARK__MASTER": "local[1]",
        "METALAKE_SPARK__DRIVER_MEMORY": "1g",
        "METALAKE_SPARK__SCRATCH_DIR": str(tmp_path / "spark"),
        "METALAKE_IT_FORGED_SECRET": forged,
    }
    result = subprocess.run(
        [sys.executable, "-m", "tests._support.spark_kafka", *topics, str(tmp_path / "checkpoint")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:] + broker.tail()
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["values"] == values and report["keys"] == ["spark"] * len(values)
    assert _consume(oauth, batch_sink, len(values)) == [(b"spark", value.upper().encode()) for value in values]
    assert _consume(oauth, stream_sink, len(values)) == [(b"spark", f"stream:{value}".encode()) for value in values]
    # The token endpoint may be called from the driver's JVM and, on a cluster, from the executors'.
    allowed = str(kafka.oauth_token_endpoint_url)
    assert report["driver_allowed_urls"] == allowed
    assert report["executor_allowed_urls"] == allowed
    # A forged secret: the API's token endpoint refuses it, the Java client's login fails before any broker request.
    failure = report["forged"]
    assert failure is not None and failure["root"] == "javax.security.auth.login.LoginException", report
    assert "response code 401" in failure["root_message"] and "invalid_client" in failure["root_message"], failure
    assert secret not in output and forged not in output


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _present(oauth: Settings, token: str) -> str | None:
    """Present ``token`` to the broker (librdkafka's token callback): None if let in, else what librdkafka logged."""
    base = {k: v for k, v in client_config(oauth).items() if not k.startswith("sasl.oauthbearer.")}
    lines = _Lines()
    logger = logging.getLogger(f"it.oauth.{uuid.uuid4().hex[:6]}")
    logger.addHandler(lines)
    logger.propagate = False
    admin = AdminClient(
        {**base, "oauth_cb": lambda _config: (token, time.time() + 300), "logger": logger, "log_level": 3}
    )
    try:
        admin.list_topics(timeout=10)
        return None
    except KafkaException:
        admin.poll(1)  # librdkafka hands its log lines to the Python logger on poll
        return " ".join(lines.lines)


def test_forged_expired_and_unsigned_tokens_are_refused(settings: Settings, oauth: Settings, mongo: Mongo) -> None:
    client_id = str(oauth.kafka.oauth_client_id)
    good = claims(iss=settings.api.issuer_url, aud=settings.api.audience, sub=client_id, client_id=client_id)
    # Signed by a key the issuer never published, with the issuer's claims.
    stranger = RSAKey.generate_key(2048, parameters={"kid": "not-the-issuers"})
    forged = jwt.encode({"alg": "RS256", "kid": "not-the-issuers"}, good, stranger)
    # Signed with the issuer's real key, expired.
    key = SigningKeyStore(mongo[CONTROL_DATABASE], settings.api).signing_key()
    now = int(time.time())
    old = {**good, "iat": now - 7200, "nbf": now - 7200, "exp": now - 3600}
    expired = jwt.encode({"alg": settings.api.signing_alg, "kid": key.kid, "typ": "at+jwt"}, old, key)
    # No signature at all.
    unsigned = f"{b64(json.dumps({'alg': 'none'}).encode())}.{b64(json.dumps(good).encode())}."
    refused = {"forged": forged, "expired": expired, "unsigned": unsigned}
    # At once: each refusal waits out its client's 10 s metadata timeout.
    with ThreadPoolExecutor(max_workers=len(refused)) as pool:
        answers = dict(zip(refused, pool.map(lambda token: _present(oauth, token), refused.values()), strict=True))
    for name, answer in answers.items():
        assert answer is not None and '"status":"invalid_token"' in answer, (name, answer)
    # The same way in, with a token the issuer really gave: let in.
    assert oauth.kafka.oauth_client_secret is not None
    real = httpx.post(
        str(oauth.kafka.oauth_token_endpoint_url),
        data={"grant_type": "client_credentials"},
        auth=(client_id, oauth.kafka.oauth_client_secret.get_secret_value()),
        timeout=10,
    )
    assert _present(oauth, real.json()["access_token"]) is None
