"""The services' configuration files of a Compose deployment, rendered as the local stack renders them (the same
functions: Kafka's listeners, Trino's HTTPS with password and JWT authentication, its access rules and resource
groups), with the paths the containers see."""

from __future__ import annotations

import json
from pathlib import Path

from ops.compose import layout
from ops.compose.layout import Ports
from ops.settings import Settings
from ops.stack.lake_storage import METASTORE_DIR, trino_file_system
from ops.stack.resource_groups import build_resource_groups, resource_groups_properties
from ops.stack.services.kafka import _LOG4J2
from ops.stack.services.trino import (
    JWT_USER_MAPPING,
    jwt_user_mapping,
    password_file,
    server_properties,
    service_users,
    user_from_tenant_claim,
)
from ops.stack.tls import server_cert
from tenants.access.rules import build_rules, write_rules
from tenants.trino_schemas import schema_namer

# Server certificates name every address a client may use on one host (host networking).
_HOSTS = ["localhost", "127.0.0.1"]
DATA_DIRS = ("kafka", "postgres", "trino", "lake", "checkpoints", "access")


def tls(state: Path) -> None:
    """The CA and the Kafka and Trino certificates (ops.stack.tls, kept while valid); the bundles are the
    containers' user's, the CA key stays with root on the host."""
    folder = state / "tls"
    for name in ("kafka", "trino"):
        cert = server_cert(folder, name, _HOSTS)
        layout.chown(cert.bundle)


def kafka(state: Path, ports: Ports) -> None:
    folder = state / "kafka"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "log4j2.properties").write_text(_LOG4J2)
    host = "127.0.0.1"
    listeners = (
        f"PLAINTEXT://{host}:{ports.kafka},CONTROLLER://{host}:{ports.kafka_controller},"
        f"SASL_SSL://{host}:{ports.kafka_sasl_ssl}"
    )
    scram_login = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    lines = [
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.bootstrap.servers={host}:{ports.kafka_controller}",
        f"listeners={listeners}",
        f"advertised.listeners={listeners}",
        "inter.broker.listener.name=PLAINTEXT",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256",
        f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={scram_login}",
        f"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config={scram_login}",
        "listener.name.sasl_ssl.ssl.keystore.type=PEM",
        "listener.name.sasl_ssl.ssl.keystore.location=/etc/kafka/tls/kafka.pem",
        "log.dirs=/var/lib/kafka/logs",
        "num.partitions=3",
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        "auto.create.topics.enable=false",
    ]
    (folder / "server.properties").write_text("\n".join(lines) + "\n")


def trino(state: Path, settings: Settings, ports: Ports) -> None:
    """``etc/`` as Trino reads it at ``/srv/trino/etc`` (its working directory is ``/srv/trino``: it finds
    ``etc/resource-groups.properties`` relative to it)."""
    etc = state / "trino" / "etc"
    (etc / "catalog").mkdir(parents=True, exist_ok=True)
    inside = Path(layout.TRINO_HOME) / "etc"
    listener = server_properties(
        settings, host="127.0.0.1", port=ports.trino, etc=inside, keystore=Path("/etc/metalake/tls/trino.pem")
    )
    config = [
        "coordinator=true",
        "node-scheduler.include-coordinator=true",
        *listener,
        "query.max-memory=1GB",
        f"query.max-execution-time={settings.trino.resource_groups.query_max_execution_s}s",
        "query.max-memory-per-node=512MB",
        "task.concurrency=2",
        "plugin.dir=/opt/trino/plugin",
        f"catalog.config-dir={inside / 'catalog'}",
        f"access-control.config-files={inside / 'access-control.properties'}",
    ]
    layout.write_private(etc / "config.properties", "\n".join(config) + "\n")
    layout.write_private(etc / "password.db", password_file(settings))
    if settings.trino.jwt.enabled and user_from_tenant_claim(settings):
        (etc / JWT_USER_MAPPING).write_text(json.dumps(jwt_user_mapping(), indent=1) + "\n")
    (etc / "password-authenticator.properties").write_text(
        f"password-authenticator.name=file\nfile.password-file={inside / 'password.db'}\n"
    )
    (etc / "access-control.properties").write_text(
        f"access-control.name=file\nsecurity.config-file={layout.RULES}\nsecurity.refresh-period=1s\n"
    )
    groups = build_resource_groups(settings.trino.resource_groups)
    (etc / "resource-groups.json").write_text(json.dumps(groups, indent=1) + "\n")
    (etc / "resource-groups.properties").write_text(resource_groups_properties(inside / "resource-groups.json"))
    (etc / "log.properties").write_text("io.trino=INFO\n")
    lake = [
        "connector.name=delta_lake",
        "hive.metastore=file",
        *_lake_file_system(settings),
        "delta.register-table-procedure.enabled=true",
        "delta.enable-non-concurrent-writes=true",
    ]
    (etc / "catalog" / "lake.properties").write_text("\n".join(lake) + "\n")


def _lake_file_system(settings: Settings) -> list[str]:
    """The file metastore inside the lake root, as the local stack keeps it (ops.stack.lake_storage): the local
    folder at its path inside the container, or the S3 bucket through Trino's native S3 file system, whose keys the
    catalog names as ``${ENV:...}`` (Trino's entrypoint reads them from its secret files)."""
    if settings.lake_on_s3:
        return trino_file_system(settings, settings.lake.s3)
    return [
        f"hive.metastore.catalog.dir=local:///{METASTORE_DIR}",
        "fs.native-local.enabled=true",
        f"local.location={layout.LAKE}",
    ]


def data(state: Path, settings: Settings, *, s3: bool = False) -> None:
    """The data folders (bind-mounted; the containers' user owns them; SeaweedFS's with ``s3``) and the access rules
    Trino starts with (service users only, until the access processor writes the tenants' rules)."""
    for name in (*DATA_DIRS, *(["seaweedfs"] if s3 else [])):
        folder = state / "data" / name
        folder.mkdir(parents=True, exist_ok=True)
        layout.chown(folder)
    if not s3:  # on S3 the metastore is a prefix of the bucket
        metastore = state / "data" / "lake" / METASTORE_DIR
        metastore.mkdir(exist_ok=True)
        layout.chown(metastore)
    rules = state / "data" / "access" / Path(layout.RULES).name
    if not rules.is_file():
        users = service_users(settings)
        rules_json = build_rules(
            users, [], catalog=settings.trino.catalog, schemas=schema_namer(settings), impersonator=settings.trino.user
        )
        write_rules(rules, rules_json)
        layout.chown(rules)
