"""A Kafka broker of its own whose SASL_SSL listener takes OAUTHBEARER tokens, validated against a JWKS URL.

The stack's broker cannot be the one: Kafka (4.3) fetches the JWKS when the listener is configured and refuses to
start if the URL does not answer, and the stack starts Kafka before the API whose JWKS it would trust. So the tests
start this one after the API, from the stack's cached Kafka jars and with the stack CA's certificate, exactly as a
production broker trusting the API's issuer (or an external IdP) would be configured. KRaft, one node, free ports.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from metalake.java import find_java
from ops.stack.services.base import StackContext
from ops.stack.services.kafka import certificate

JWT_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
ALLOWED_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"


@dataclass(frozen=True)
class OAuthBroker:
    bootstrap: str  # the SASL_SSL (OAUTHBEARER) listener
    log: Path

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.is_file() else ""


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _properties(data: Path, ports: list[int], bundle: Path, jwks_url: str, issuer: str, audience: str) -> str:
    plain, controller, sasl = ports
    listeners = f"PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{controller},SASL_SSL://127.0.0.1:{sasl}"
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}",
            f"listeners={listeners}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl}",
            "inter.broker.listener.name=PLAINTEXT",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
            "sasl.enabled.mechanisms=OAUTHBEARER",
            f"listener.name.sasl_ssl.oauthbearer.sasl.jaas.config={JWT_LOGIN}",
            f"listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class={VALIDATOR}",
            f"sasl.oauthbearer.jwks.endpoint.url={jwks_url}",
            f"sasl.oauthbearer.expected.issuer={issuer}",
            f"sasl.oauthbearer.expected.audience={audience}",
            "listener.name.sasl_ssl.ssl.keystore.type=PEM",
            f"listener.name.sasl_ssl.ssl.keystore.location={bundle}",
            f"log.dirs={data / 'logs'}",
            "num.partitions=1",
            "num.network.threads=2",
            "num.io.threads=2",
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "",
        ]
    )


@contextmanager
def oauth_broker(
    ctx: StackContext, work: Path, *, jwks_url: str, issuer: str, audience: str, timeout_s: float = 90.0
) -> Iterator[OAuthBroker]:
    """Start the broker in ``work``, yield once its SASL_SSL port answers, stop it (SIGTERM, then SIGKILL)."""
    work.mkdir(parents=True, exist_ok=True)
    java = str(find_java(17, env_var="METALAKE_KAFKA_JAVA_HOME"))
    classpath = str(ctx.cache_dir("kafka") / "libs" / "*")
    ports = _free_ports(3)
    config = work / "server.properties"
    config.write_text(_properties(work, ports, certificate(ctx).bundle, jwks_url, issuer, audience))
    (work / "log4j2.properties").write_text(
        "status = warn\nappender.console.type = Console\nappender.console.name = OUT\n"
        "appender.console.layout.type = PatternLayout\nappender.console.layout.pattern = [%d] %p %m (%c)%n\n"
        "rootLogger.level = INFO\nrootLogger.appenderRef.out.ref = OUT\n"
    )
    log4j = f"-Dlog4j2.configurationFile={work / 'log4j2.properties'}"
    log = work / "broker.log"
    with log.open("ab") as out:
        subprocess.run(
            [
                *(java, "-cp", classpath, log4j, "kafka.tools.StorageTool", "format", "--standalone"),
                *("--ignore-formatted", "-t", uuid.uuid4().hex[:22], "-c", str(config)),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=120,
            check=True,
        )
        proc = subprocess.Popen(
            [
                *(java, "-Xms128m", "-Xmx512m", f"-D{ALLOWED_URLS}={jwks_url}", log4j, f"-Dkafka.logs.dir={work}"),
                *("-cp", classpath, "kafka.Kafka", str(config)),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    broker = OAuthBroker(bootstrap=f"127.0.0.1:{ports[2]}", log=log)
    try:
        deadline = time.monotonic() + timeout_s
        while not _port_open(ports[2]):
            if proc.poll() is not None:
                raise RuntimeError(f"the OAUTHBEARER broker exited ({proc.returncode}):\n{broker.tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the OAUTHBEARER broker did not listen in {timeout_s:.0f}s:\n{broker.tail()}")
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
