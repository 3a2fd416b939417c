"""A Kafka broker of its own that authorizes: KRaft's StandardAuthorizer, ``allow.everyone.if.no.acl.found=false``,
one super user (``admin``), SCRAM-SHA-512 users on a SASL_SSL listener (the stack CA's certificate).

The stack's broker runs no authorizer (every test and process of the session would need ACLs), hence this one, as
tests/_support/oauth_broker.py's, from the stack's cached Kafka jars, on free ports. Its controller and inter-broker
listeners authenticate the broker itself as ``admin`` (PLAIN: KRaft's controller listener takes no SCRAM), so no
anonymous principal is a super user. The SCRAM users are written into the metadata log when the storage is
formatted (``--add-scram``): they exist before the first client connects.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from oauth_broker import _free_ports, _port_open

from metalake.java import find_java
from ops.stack.services.base import StackContext
from ops.stack.services.kafka import certificate

ADMIN = "admin"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class AclBroker:
    bootstrap: str  # the SASL_SSL (SCRAM-SHA-512) listener
    passwords: Mapping[str, str]  # SCRAM user -> password, the admin's included
    log: Path

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.is_file() else ""


def _properties(data: Path, ports: list[int], bundle: Path, admin_password: str) -> str:
    controller, internal, sasl = ports
    plain = f'{PLAIN} required username="{ADMIN}" password="{admin_password}" user_{ADMIN}="{admin_password}";'
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}",
            f"listeners=CONTROLLER://127.0.0.1:{controller},INTERNAL://127.0.0.1:{internal},"
            f"SASL_SSL://127.0.0.1:{sasl}",
            f"advertised.listeners=INTERNAL://127.0.0.1:{internal},SASL_SSL://127.0.0.1:{sasl}",
            "inter.broker.listener.name=INTERNAL",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.controller.protocol=PLAIN",
            "sasl.mechanism.inter.broker.protocol=PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
            f"listener.name.controller.plain.sasl.jaas.config={plain}",
            "listener.name.internal.sasl.enabled.mechanisms=PLAIN",
            f"listener.name.internal.plain.sasl.jaas.config={plain}",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512",
            f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={SCRAM} required;",
            "listener.name.sasl_ssl.ssl.keystore.type=PEM",
            f"listener.name.sasl_ssl.ssl.keystore.location={bundle}",
            f"authorizer.class.name={AUTHORIZER}",
            f"super.users=User:{ADMIN}",
            "allow.everyone.if.no.acl.found=false",
            f"log.dirs={data / 'logs'}",
            "num.partitions=1",
            "num.network.threads=2",
            "num.io.threads=2",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "",
        ]
    )


@contextmanager
def acl_broker(ctx: StackContext, work: Path, users: list[str], *, timeout_s: float = 90.0) -> Iterator[AclBroker]:
    """Start the broker in ``work`` with a SCRAM user (random password) for each of ``users`` and for the admin;
    yield once its SASL_SSL port answers; stop it (SIGTERM, then SIGKILL)."""
    work.mkdir(parents=True, exist_ok=True)
    java = str(find_java(17, env_var="METALAKE_KAFKA_JAVA_HOME"))
    classpath = str(ctx.cache_dir("kafka") / "libs" / "*")
    ports = _free_ports(3)
    passwords = {user: secrets.token_hex(12) for user in [ADMIN, *users]}
    config = work / "server.properties"
    config.write_text(_properties(work, ports, certificate(ctx).bundle, passwords[ADMIN]))
    (work / "log4j2.properties").write_text(
        "status = warn\nappender.console.type = Console\nappender.console.name = OUT\n"
        "appender.console.layout.type = PatternLayout\nappender.console.layout.pattern = [%d] %p %m (%c)%n\n"
        "rootLogger.level = INFO\nrootLogger.appenderRef.out.ref = OUT\n"
        # The authorizer logs every denial at INFO: kept (the test's failures read them), its allowances are DEBUG.
        "logger.authorizer.name = kafka.authorizer.logger\nlogger.authorizer.level = INFO\n"
    )
    log4j = f"-Dlog4j2.configurationFile={work / 'log4j2.properties'}"
    scram = [f"SCRAM-SHA-512=[name={user},password={password}]" for user, password in passwords.items()]
    log = work / "broker.log"
    with log.open("ab") as out:
        subprocess.run(
            [
                *(java, "-cp", classpath, log4j, "kafka.tools.StorageTool", "format", "--standalone"),
                *("--ignore-formatted", "-t", uuid.uuid4().hex[:22], "-c", str(config)),
                *(arg for entry in scram for arg in ("--add-scram", entry)),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=120,
            check=True,
        )
        proc = subprocess.Popen(
            [
                *(java, "-Xms128m", "-Xmx512m", log4j, f"-Dkafka.logs.dir={work}"),
                *("-cp", classpath, "kafka.Kafka", str(config)),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    broker = AclBroker(bootstrap=f"127.0.0.1:{ports[2]}", passwords=passwords, log=log)
    try:
        deadline = time.monotonic() + timeout_s
        while not _port_open(ports[2]):
            if proc.poll() is not None:
                raise RuntimeError(f"the authorizing broker exited ({proc.returncode}):\n{broker.tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the authorizing broker did not listen in {timeout_s:.0f}s:\n{broker.tail()}")
            time.sleep(0.5)
        yield broker
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
