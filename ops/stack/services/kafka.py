"""Kafka 4.x, one KRaft node that is broker and controller, from Maven Central jars.

Two client listeners: PLAINTEXT (the default the tests and processes use) and SASL_SSL (SCRAM-SHA-512/256, a
certificate from the stack's CA: ``ops.stack.tls``), so a client can be configured exactly as against a production
cluster. The SCRAM user is upserted through the admin API after every start (over PLAINTEXT), so a data directory
formatted before the listener existed gets it too, and a changed password in ``stack.env`` takes effect.
"""

from __future__ import annotations

import subprocess
import uuid

from pydantic import SecretStr

from metalake.java import find_java
from metalake.settings import KafkaSettings
from ops.stack.health import kafka_probe
from ops.stack.services.base import Service, ServiceError, StackContext
from ops.stack.tls import ServerCert, server_cert

# The SCRAM user the stack creates when ``kafka.sasl_username`` is unset.
DEFAULT_SCRAM_USER = "metalake"
SCRAM_ITERATIONS = 8192

_LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


class Kafka(Service):
    name = "kafka"

    def ports(self, ctx: StackContext) -> list[int]:
        p = ctx.settings.stack.ports
        return [p.kafka, p.kafka_controller, p.kafka_sasl_ssl]

    def fetch(self, ctx: StackContext) -> None:
        ctx.run_fetch_script("kafka", self.name)

    def _classpath(self, ctx: StackContext) -> str:
        return str(ctx.cache_dir("kafka") / "libs" / "*")

    def _java(self) -> str:
        return str(find_java(17, env_var="METALAKE_KAFKA_JAVA_HOME"))

    def prepare(self, ctx: StackContext) -> None:
        run, data = ctx.run_dir(self.name), ctx.data_dir(self.name)
        run.mkdir(parents=True, exist_ok=True)
        data.mkdir(parents=True, exist_ok=True)
        host, p = ctx.host, ctx.settings.stack.ports
        cert = certificate(ctx)
        (run / "log4j2.properties").write_text(_LOG4J2)
        listeners = f"PLAINTEXT://{host}:{p.kafka},CONTROLLER://{host}:{p.kafka_controller},SASL_SSL://{host}:{p.kafka_sasl_ssl}"
        scram_login = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        (run / "server.properties").write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.bootstrap.servers={host}:{p.kafka_controller}",
                    f"listeners={listeners}",
                    f"advertised.listeners={listeners}",
                    "inter.broker.listener.name=PLAINTEXT",
                    "controller.listener.names=CONTROLLER",
                    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
                    "sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256",
                    f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={scram_login}",
                    f"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config={scram_login}",
                    # PEM as ops.stack.tls writes it: the key (PKCS#8) then the certificate chain, in one file.
                    "listener.name.sasl_ssl.ssl.keystore.type=PEM",
                    f"listener.name.sasl_ssl.ssl.keystore.location={cert.bundle}",
                    f"log.dirs={data / 'logs'}",
                    f"num.partitions={ctx.settings.kafka.topic_partitions}",
                    "num.network.threads=2",
                    "num.io.threads=2",
                    # One node: every internal topic must have replication factor 1, or creating it fails.
                    "offsets.topic.replication.factor=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "share.coordinator.state.topic.replication.factor=1",
                    "share.coordinator.state.topic.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    "auto.create.topics.enable=false",
                    "",
                ]
            )
        )
        if (data / "logs" / "meta.properties").exists():
            return
        cluster_id = uuid.uuid4().hex[:22]
        log = ctx.log_file(self.name)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            result = subprocess.run(
                [
                    self._java(),
                    "-cp",
                    self._classpath(ctx),
                    f"-Dlog4j2.configurationFile={run / 'log4j2.properties'}",
                    "kafka.tools.StorageTool",
                    "format",
                    "--standalone",
                    "--ignore-formatted",
                    "-t",
                    cluster_id,
                    "-c",
                    str(run / "server.properties"),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=120,
                check=False,
            )
        if result.returncode != 0:
            raise ServiceError(f"kafka: formatting the KRaft storage failed (exit {result.returncode}); see {log}")

    def argv(self, ctx: StackContext) -> list[str]:
        run = ctx.run_dir(self.name)
        return [
            self._java(),
            "-Xms256m",
            "-Xmx1g",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={ctx.data_dir(self.name)}",
            f"-Dlog4j2.configurationFile={run / 'log4j2.properties'}",
            "-cp",
            self._classpath(ctx),
            "kafka.Kafka",
            str(run / "server.properties"),
        ]

    def probe(self, ctx: StackContext) -> str | None:
        # The stack's own PLAINTEXT listener, whatever listener the processes are configured for: the SCRAM user the
        # SASL_SSL one needs is created only once the broker answers. (A broker started before the SASL_SSL listener
        # existed stays healthy: restart it to get the listener.)
        return kafka_probe(f"{ctx.host}:{ctx.settings.stack.ports.kafka}")


def certificate(ctx: StackContext) -> ServerCert:
    """The broker's certificate from the stack's CA, for the stack's host and loopback."""
    hosts = list(dict.fromkeys([ctx.host, "localhost", "127.0.0.1"]))
    return server_cert(ctx.stack_dir / "tls", "kafka", hosts)


def scram_user(ctx: StackContext) -> str:
    return ctx.settings.kafka.sasl_username or DEFAULT_SCRAM_USER


def scram_password(ctx: StackContext) -> str | None:
    """The SCRAM password: the setting (environment), else the one ``stack.env`` holds (generated there before any
    service starts, after these settings were loaded)."""
    if ctx.settings.kafka.sasl_password is not None:
        return ctx.settings.kafka.sasl_password.get_secret_value()
    env_file = ctx.stack_dir / "stack.env"
    if env_file.is_file():
        for line in env_file.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and key == "METALAKE_KAFKA__SASL_PASSWORD" and value:
                return value
    return None


def ensure_scram_user(ctx: StackContext, timeout_s: float = 30.0) -> str:
    """Upsert the stack's SCRAM user (both SHA mechanisms) through the PLAINTEXT listener; return its name."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    password = scram_password(ctx)
    if password is None:
        raise ServiceError("kafka: no SCRAM password (METALAKE_KAFKA__SASL_PASSWORD, generated into stack.env)")
    user = scram_user(ctx)
    admin = AdminClient({"bootstrap.servers": f"{ctx.host}:{ctx.settings.stack.ports.kafka}", "log_level": 0})
    # One request per mechanism: the broker refuses two alterations of one user in a request.
    for mechanism in (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256):
        upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, SCRAM_ITERATIONS), password.encode())
        for future in admin.alter_user_scram_credentials([upsert]).values():
            try:
                future.result(timeout=timeout_s)
            except KafkaException as exc:
                # The broker's error only: the request (which holds the password) is not part of it.
                raise ServiceError(f"kafka: creating SCRAM user {user!r} failed: {exc.args[0]}") from None
    return user


def sasl_ssl_client_settings(ctx: StackContext) -> KafkaSettings:
    """What a client sets to reach the stack's SASL_SSL listener (the tests, and docs/local-stack.md, use this)."""
    password = scram_password(ctx)
    ca = ctx.settings.kafka.ssl_ca_location or ctx.stack_dir / "tls" / "ca.pem"
    return ctx.settings.kafka.model_copy(
        update={
            "bootstrap_servers": f"{ctx.host}:{ctx.settings.stack.ports.kafka_sasl_ssl}",
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": scram_user(ctx),
            "sasl_password": None if password is None else SecretStr(password),
            "ssl_ca_location": ca,
        }
    )
