"""The pipeline through the broker's SASL_SSL listener (SCRAM-SHA-512, a certificate from the stack's CA), as a
production cluster would be reached: topics created and events produced by librdkafka clients, read by the streaming
job's Spark source (the Java client) and its changes produced, all over SASL_SSL; a wrong password and an untrusted
CA fail naming the setting at fault, never the secret.

One streaming job of its own (a dedicated tenant's, so the session's pooled job on PLAINTEXT is untouched), stopped
at the end."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from pymongo import MongoClient

from metalake.http.health import kafka_check, run_checks
from metalake.kafka import EventProducer, ensure_topics
from metalake.kafka.connection import check_connection
from metalake.kafka.security import KafkaAuthenticationFailed, KafkaTlsFailed
from metalake.settings import KafkaSettings
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.health import port_open
from ops.stack.manager import StackManager
from ops.stack.services.kafka import sasl_ssl_client_settings
from ops.stack.tls import local_ca
from tenants.naming import TenantNames, names_for
from tests._support.itest import wait_for
from tests._support.lakeit import upsert
from tests._support.streamjob import Job, publish_confirmed

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sasl(settings: Settings, stack: StackManager) -> Settings:
    """The session's settings with the Kafka client pointed at the SASL_SSL listener."""
    kafka = sasl_ssl_client_settings(stack.context)
    host, port = settings.stack.host, settings.stack.ports.kafka_sasl_ssl
    assert port_open(host, port), (
        f"no SASL_SSL listener on {host}:{port}: the broker was started before it existed; restart it "
        "(metalake stack down kafka && metalake stack up --with-job)"
    )
    return settings.model_copy(update={"kafka": kafka})


def _env(kafka: KafkaSettings) -> dict[str, str]:
    """The variables a process sets to be this client (the streaming job below)."""
    assert kafka.sasl_password is not None and kafka.ssl_ca_location is not None
    return {
        "METALAKE_KAFKA__BOOTSTRAP_SERVERS": str(kafka.bootstrap_servers),
        "METALAKE_KAFKA__SECURITY_PROTOCOL": kafka.security_protocol,
        "METALAKE_KAFKA__SASL_MECHANISM": kafka.sasl_mechanism,
        "METALAKE_KAFKA__SASL_USERNAME": str(kafka.sasl_username),
        "METALAKE_KAFKA__SASL_PASSWORD": kafka.sasl_password.get_secret_value(),
        "METALAKE_KAFKA__SSL_CA_LOCATION": str(kafka.ssl_ca_location),
    }


@pytest.fixture
def dedicated(sasl: Settings, tenant: str) -> Iterator[TenantNames]:
    names = names_for(tenant, sasl.lake_root, dedicated=True)
    # Created through the SASL_SSL listener: the admin client authenticates too.
    assert ensure_topics(sasl, [names.priority_topic, names.bulk_topic]) == [names.priority_topic, names.bulk_topic]
    yield names


def _delta_rows(table: Path) -> int:
    """Rows of a Delta table, from its log: the live files' record counts (no Spark session for one number)."""
    live: dict[str, int] = {}
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[action["add"]["path"]] = json.loads(action["add"]["stats"])["numRecords"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return sum(live.values())


def test_the_pipeline_runs_through_sasl_ssl(
    sasl: Settings, dedicated: TenantNames, mongo: MongoClient[dict[str, Any]], tmp_path: Path
) -> None:
    tenant = dedicated.tenant_id
    urns = [asset_urn("postgres", "it", "sasl", "public", f"t{i}") for i in range(3)]
    job = Job(tenant, tmp_path / "job.log", env=_env(sasl.kafka))
    try:
        job.wait_ready()
        with EventProducer(sasl) as producer:
            publish_confirmed(producer, [upsert(tenant, u, kind="table", name=u[-2:]) for u in urns], dedicated)
        assets = mongo[dedicated.mongo_database]["assets"]

        def in_mongo() -> bool | None:
            assert job.alive, job.tail()
            return sorted(d["_id"] for d in assets.find({}, {"_id": 1})) == sorted(urns) or None

        wait_for("the assets in MongoDB", in_mongo, timeout_s=180, interval_s=1)
        table = dedicated.table("assets").path

        def in_delta() -> bool | None:
            assert job.alive, job.tail()
            return ((table / "_delta_log").is_dir() and _delta_rows(table) == len(urns)) or None

        wait_for("the assets in Delta", in_delta, timeout_s=180, interval_s=1)
    finally:
        job.stop()
    log = job.tail(200_000)
    # The job's Java client and its librdkafka producer (of the changes) both went through SASL_SSL: nothing refused.
    assert "kafka.security_error" not in log and "SaslAuthenticationException" not in log
    assert '"security_protocol": "SASL_SSL"' in log  # the job said which protocol its queries use
    assert sasl.kafka.sasl_password is not None and sasl.kafka.sasl_password.get_secret_value() not in log


def test_a_wrong_password_fails_naming_the_setting(sasl: Settings) -> None:
    password = "not-the-password-0123456789"
    wrong = sasl.model_copy(update={"kafka": sasl.kafka.model_copy(update={"sasl_password": SecretStr(password)})})
    with pytest.raises(KafkaAuthenticationFailed) as err:
        check_connection(wrong, timeout_s=5)
    assert err.value.setting == "kafka.sasl_password" and "kafka.sasl_password" in str(err.value)
    assert password not in str(err.value)
    # A process's readiness says which: the class, never the text.
    assert run_checks({"kafka": kafka_check(wrong, 5)}, 10) == {"kafka": "down: KafkaAuthenticationFailed"}


def test_an_untrusted_ca_fails_naming_the_setting(sasl: Settings, tmp_path: Path) -> None:
    other_ca, _ = local_ca(tmp_path / "other-ca")  # a CA that did not sign the broker's certificate
    untrusting = sasl.model_copy(update={"kafka": sasl.kafka.model_copy(update={"ssl_ca_location": other_ca})})
    with pytest.raises(KafkaTlsFailed) as err:
        check_connection(untrusting, timeout_s=5)
    assert err.value.setting == "kafka.ssl_ca_location" and str(other_ca) in str(err.value)
    assert sasl.kafka.sasl_password is not None
    assert sasl.kafka.sasl_password.get_secret_value() not in str(err.value)


def test_the_right_settings_connect(sasl: Settings) -> None:
    check_connection(sasl, timeout_s=10)
