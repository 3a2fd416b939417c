"""A Kafka broker of a test's own (KRaft, one node, free loopback ports), run from the stack's cached Kafka jars: the
tests whose broker needs what the stack's cannot have (an OAUTHBEARER listener trusting the API's JWKS, an
authorizer) describe its listeners, and this module formats its storage, starts it, waits for its client port and
stops it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from metalake.java import find_java
from ops.stack.services.base import StackContext

# What every single-node test broker sets besides its listeners: one replica of everything, few threads.
SINGLE_NODE = [
    "process.roles=broker,controller",
    "node.id=1",
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
]
_LOG4J = (
    "status = warn\nappender.console.type = Console\nappender.console.name = OUT\n"
    "appender.console.layout.type = PatternLayout\nappender.console.layout.pattern = [%d] %p %m (%c)%n\n"
    "rootLogger.level = INFO\nrootLogger.appenderRef.out.ref = OUT\n"
)


@dataclass(frozen=True)
class RunningBroker:
    ports: list[int]  # as handed to the listeners' renderer
    log: Path

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.is_file() else ""


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def private_broker(
    ctx: StackContext,
    work: Path,
    listeners: Callable[[list[int]], list[str]],
    *,
    name: str,
    client_port: int = 2,
    format_args: Sequence[str] = (),
    jvm_args: Sequence[str] = (),
    log4j: str = "",
    timeout_s: float = 90.0,
) -> Iterator[RunningBroker]:
    """Start a broker in ``work`` whose configuration is ``listeners(three free ports)`` (its listeners, security and
    anything else) plus :data:`SINGLE_NODE` and its log folder; yield once ``ports[client_port]`` answers; stop it
    (SIGTERM, then SIGKILL). ``format_args`` go to the storage's format (e.g. ``--add-scram``), ``jvm_args`` to the
    broker's JVM, ``log4j`` after the console logger's configuration. ``name`` says which broker failed."""
    work.mkdir(parents=True, exist_ok=True)
    java = str(find_java(17, env_var="METALAKE_KAFKA_JAVA_HOME"))
    classpath = str(ctx.cache_dir("kafka") / "libs" / "*")
    ports = free_ports(3)
    config = work / "server.properties"
    config.write_text("\n".join([*listeners(ports), *SINGLE_NODE, f"log.dirs={work / 'logs'}", ""]))
    (work / "log4j2.properties").write_text(_LOG4J + log4j)
    logging = f"-Dlog4j2.configurationFile={work / 'log4j2.properties'}"
    log = work / "broker.log"
    with log.open("ab") as out:
        subprocess.run(
            [
                *(java, "-cp", classpath, logging, "kafka.tools.StorageTool", "format", "--standalone"),
                *("--ignore-formatted", "-t", uuid.uuid4().hex[:22], "-c", str(config), *format_args),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=120,
            check=True,
        )
        proc = subprocess.Popen(
            [
                *(java, "-Xms128m", "-Xmx512m", *jvm_args, logging, f"-Dkafka.logs.dir={work}"),
                *("-cp", classpath, "kafka.Kafka", str(config)),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    broker = RunningBroker(ports, log)
    try:
        deadline = time.monotonic() + timeout_s
        while not port_open(ports[client_port]):
            if proc.poll() is not None:
                raise RuntimeError(f"the {name} broker exited ({proc.returncode}):\n{broker.tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the {name} broker did not listen in {timeout_s:.0f}s:\n{broker.tail()}")
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
