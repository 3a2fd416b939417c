"""The ACLs derived for each process: principals and groups from the settings, dedicated tenants' topics by prefix,
topic creation for provisioning only, idempotent producers, nothing for a process that does not need it; the
command's renderings; docs/production.md's table is the function's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclOperation, AclPermissionType, ResourcePatternType, ResourceType
from pydantic import ValidationError
from typer.testing import CliRunner

import ops.cli.kafka_acls as kafka_acls
from metalake.settings import KafkaPrincipalSettings, KafkaSettings
from ops.cli import kafka as kafka_cli
from ops.cli.kafka_acls import PROCESSES, Acl, kafka_acls_commands, render, render_markdown, required_acls
from ops.settings import Settings
from tenants.naming import CHANGES_TOPIC, DEDICATED_TOPIC_PREFIX, PRIORITY_TOPIC, names_for

DOC = Path(__file__).resolve().parents[3] / "docs" / "production.md"


def _of(acls: list[Acl], process: str) -> set[tuple[str, str, str, str]]:
    return {(a.resource_type, a.pattern, a.name, a.operation) for a in acls if a.process == process}


def test_each_principal_is_its_setting() -> None:
    settings = Settings(kafka=KafkaSettings(principals=KafkaPrincipalSettings(access="trino-rules", lake="User:erase")))
    acls = required_acls(settings)
    assert {a.principal for a in acls if a.process == "access"} == {"User:trino-rules"}
    assert {a.principal for a in acls if a.process == "lake"} == {"User:erase"}  # the type is not doubled
    assert {a.principal for a in acls if a.process == "api"} == {"User:metalake-api"}


@pytest.mark.parametrize("bad", ["", "*", "User:*", "two words", "a,b"])
def test_a_principal_cannot_be_everyone_or_several(bad: str) -> None:
    with pytest.raises(ValidationError):
        KafkaPrincipalSettings(api=bad)


def test_principals_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METALAKE_KAFKA__PRINCIPALS__OUTBOUND", "notifier")
    assert Settings().kafka.principals.outbound == "notifier"


def test_groups_follow_the_settings() -> None:
    settings = Settings.model_validate(
        {
            "propagation": {"group_id": "prop-x"},
            "outbound": {"group_id": "out-x", "retry_group_id": "retry-x"},
            "access": {"group_id": "acc-x"},
        }
    )
    groups = {(a.process, a.name) for a in required_acls(settings) if a.resource_type == "GROUP"}
    assert {("propagation", "prop-x"), ("outbound", "out-x"), ("outbound", "retry-x"), ("access", "acc-x")} <= groups
    assert not [g for g in groups if g[0] == "stream"]  # the Spark source assigns: no group ACL
    readers = {(a.name, a.operation) for a in required_acls(settings) if a.process in ("api", "lake")}
    assert {("metalake-offsets-reader-", "DESCRIBE"), ("metalake.deadletters.reader", "DESCRIBE")} <= readers


def test_dedicated_tenants_topics_are_one_prefix_covering_every_tenant() -> None:
    for topic_class in ("priority", "bulk"):
        assert names_for("any-tenant", Path("/l"), dedicated=True).topic(topic_class).startswith(DEDICATED_TOPIC_PREFIX)
    dedicated = [a for a in required_acls(Settings()) if a.name == DEDICATED_TOPIC_PREFIX]
    assert dedicated and all(a.pattern == "PREFIXED" for a in dedicated)
    assert not [a for a in required_acls(Settings()) if a.name.startswith(DEDICATED_TOPIC_PREFIX + "x")]


def test_only_provisioning_creates_or_deletes_topics_and_only_dedicated_ones() -> None:
    acls = required_acls(Settings())
    creating = [a for a in acls if a.operation in ("CREATE", "DELETE")]
    assert {(a.process, a.pattern, a.name) for a in creating} == {("lake", "PREFIXED", DEDICATED_TOPIC_PREFIX)}


def test_what_each_process_reads_and_writes() -> None:
    acls = required_acls(Settings())
    topic = "TOPIC", "LITERAL"
    assert (*topic, CHANGES_TOPIC, "READ") not in _of(acls, "connect")
    assert (*topic, CHANGES_TOPIC, "WRITE") in _of(acls, "stream")
    assert (*topic, PRIORITY_TOPIC, "WRITE") in _of(acls, "propagation")  # propagated tags
    assert _of(acls, "access") == {(*topic, CHANGES_TOPIC, "READ"), ("GROUP", "LITERAL", "metalake-access", "READ")}
    assert (*topic, "metalake.outbound.dlq", "WRITE") in _of(acls, "outbound")
    assert (*topic, "metalake.outbound.dlq", "READ") in _of(acls, "api")  # the listing


def test_every_producer_is_granted_idempotent_writes_and_none_is_transactional() -> None:
    acls = required_acls(Settings())
    writers = {a.process for a in acls if a.operation == "WRITE"}
    idempotent = {a.process for a in acls if a.operation == "IDEMPOTENT_WRITE"}
    assert writers == idempotent == set(PROCESSES) - {"access"}
    assert all(a.name == "kafka-cluster" for a in acls if a.resource_type == "CLUSTER")


def test_a_shared_principal_gets_each_binding_once() -> None:
    one = KafkaPrincipalSettings(api="metalake", connect="metalake")
    acls = required_acls(Settings(kafka=KafkaSettings(principals=one)), ["api", "connect"])
    keys = [(a.principal, a.resource_type, a.pattern, a.name, a.operation) for a in acls]
    assert len(keys) == len(set(keys))
    assert {a.process for a in acls} == {"api", "connect"}  # what the connector worker adds (its DLQ)


def test_renderings() -> None:
    acls = required_acls(Settings(), ["lake"])
    table = render(acls).splitlines()
    assert table[0].split()[:5] == ["PRINCIPAL", "OPERATION", "RESOURCE", "PATTERN", "NAME"]
    assert len(table) == len(acls) + 1
    commands = kafka_acls_commands(acls, "b:9094").splitlines()
    assert (
        "kafka-acls.sh --bootstrap-server b:9094 --command-config <admin.properties> --add --allow-principal "
        "'User:metalake-lake' --operation Describe --group 'metalake-offsets-reader-' --resource-pattern-type prefixed"
    ) in commands
    assert any(c.endswith("--operation IdempotentWrite --cluster") for c in commands)


def test_the_production_doc_shows_the_derived_table() -> None:
    text = DOC.read_text("utf-8")
    start = text.index("<!-- kafka-acls:begin -->\n") + len("<!-- kafka-acls:begin -->\n")
    end = text.index("<!-- kafka-acls:end -->")
    shown = [line.strip() for line in text[start:end].strip().splitlines()]  # indented under its list item
    assert shown == render_markdown(required_acls(Settings())).splitlines(), (
        "regenerate with: python -c 'from ops.cli.kafka_acls import *; from ops.settings import Settings; "
        "print(render_markdown(required_acls(Settings())))'"
    )


class FakeAdmin:
    def __init__(self, refuse: bool = False) -> None:
        self.bindings: list[Any] = []
        self.refuse = refuse

    def create_acls(self, bindings: list[Any], request_timeout: float) -> dict[Any, Any]:
        self.bindings += bindings
        return {b: _Done(self.refuse) for b in bindings}


class _Done:
    def __init__(self, refuse: bool) -> None:
        self.refuse = refuse

    def result(self, timeout: float) -> None:
        if self.refuse:
            raise KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed"))


def _cli(monkeypatch: pytest.MonkeyPatch, admin: FakeAdmin, *args: str) -> Any:
    monkeypatch.setattr(kafka_acls, "AdminClient", lambda config: admin)
    monkeypatch.setenv("METALAKE_KAFKA__BOOTSTRAP_SERVERS", "b:9094")
    return CliRunner().invoke(kafka_cli.app, ["acls", *args])


def test_the_command_prints_and_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = FakeAdmin()
    done = _cli(monkeypatch, admin, "--apply", "--process", "access")
    assert done.exit_code == 0, done.output
    assert "User:metalake-access" in done.stdout and "applied 2 ACL bindings" in done.stderr
    groups = [b for b in admin.bindings if b.restype == ResourceType.GROUP]
    assert len(admin.bindings) == 2 and len(groups) == 1
    assert groups[0].name == "metalake-access" and groups[0].resource_pattern_type == ResourcePatternType.LITERAL
    assert {b.operation for b in admin.bindings} == {AclOperation.READ}
    assert {b.permission_type for b in admin.bindings} == {AclPermissionType.ALLOW}
    assert {b.host for b in admin.bindings} == {"*"}


def test_the_cluster_resource_is_librdkafka_s_broker_type(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = FakeAdmin()
    assert _cli(monkeypatch, admin, "--apply", "--process", "lake").exit_code == 0
    cluster = [b for b in admin.bindings if b.operation == AclOperation.IDEMPOTENT_WRITE]
    assert [(b.restype, b.name) for b in cluster] == [(ResourceType.BROKER, "kafka-cluster")]
    prefixed = [b for b in admin.bindings if b.resource_pattern_type == ResourcePatternType.PREFIXED]
    # Its throwaway offsets-reader groups, and the dedicated tenants' topics provisioning creates and deletes.
    assert sorted({b.name for b in prefixed}) == sorted({"metalake-offsets-reader-", DEDICATED_TOPIC_PREFIX})


def test_a_refusal_is_an_error_without_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METALAKE_KAFKA__SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("METALAKE_KAFKA__SASL_USERNAME", "ops")
    monkeypatch.setenv("METALAKE_KAFKA__SASL_PASSWORD", "s3cret-pass-123")
    done = _cli(monkeypatch, FakeAdmin(refuse=True), "--apply")
    assert done.exit_code == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in done.stderr and "'principal': 'ops'" in done.stderr
    assert "s3cret-pass-123" not in done.output


def test_json_and_unknown_process(monkeypatch: pytest.MonkeyPatch) -> None:
    done = _cli(monkeypatch, FakeAdmin(), "--format", "json", "--process", "propagation")
    rows = json.loads(done.stdout)
    assert {r["process"] for r in rows} == {"propagation"} and all(r["principal"] for r in rows)
    refused = _cli(monkeypatch, FakeAdmin(), "--process", "spark")
    assert refused.exit_code == 2 and "unknown spark" in refused.stderr


def test_secret_settings_are_not_needed_to_print(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("METALAKE_KAFKA__BOOTSTRAP_SERVERS", raising=False)
    done = CliRunner().invoke(kafka_cli.app, ["acls", "--format", "kafka-acls"])
    assert done.exit_code == 0 and "--bootstrap-server" in done.stdout
