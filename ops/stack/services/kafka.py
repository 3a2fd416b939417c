"""Kafka 4.x, one KRaft node that is broker and controller, from Maven Central jars."""

from __future__ import annotations

import subprocess
import uuid

from metalake.java import find_java
from ops.stack.health import kafka_probe
from ops.stack.services.base import Service, ServiceError, StackContext

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
        return [p.kafka, p.kafka_controller]

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
        (run / "log4j2.properties").write_text(_LOG4J2)
        (run / "server.properties").write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.bootstrap.servers={host}:{p.kafka_controller}",
                    f"listeners=PLAINTEXT://{host}:{p.kafka},CONTROLLER://{host}:{p.kafka_controller}",
                    f"advertised.listeners=PLAINTEXT://{host}:{p.kafka},CONTROLLER://{host}:{p.kafka_controller}",
                    "inter.broker.listener.name=PLAINTEXT",
                    "controller.listener.names=CONTROLLER",
                    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
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
        return kafka_probe(ctx.settings.kafka_bootstrap)
