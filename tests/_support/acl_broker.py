"""A Kafka broker of its own that authorizes: KRaft's StandardAuthorizer, ``allow.everyone.if.no.acl.found=false``,
one super user (``admin``), SCRAM-SHA-512 users on a SASL_SSL listener (the stack CA's certificate).

The stack's broker runs no authorizer (every test and process of the session would need ACLs), hence this one, as
tests/_support/oauth_broker.py's, from the stack's cached Kafka jars, on free ports. Its controller and inter-broker
listeners authenticate the broker itself as ``admin`` (PLAIN: KRaft's controller listener takes no SCRAM), so no
anonymous principal is a super user. The SCRAM users are written into the metadata log when the storage is
formatted (``--add-scram``): they exist before the first client connects.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ops.stack.services.base import StackContext
from ops.stack.services.kafka import certificate
from tests._support.private_broker import private_broker

ADMIN = "admin"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
# The authorizer logs every denial at INFO: kept (the test's failures read them), its allowances are DEBUG.
_AUTHORIZER_LOG = "logger.authorizer.name = kafka.authorizer.logger\nlogger.authorizer.level = INFO\n"


@dataclass(frozen=True)
class AclBroker:
    bootstrap: str  # the SASL_SSL (SCRAM-SHA-512) listener
    passwords: Mapping[str, str]  # SCRAM user -> password, the admin's included
    log: Path

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.is_file() else ""


def _listeners(ports: list[int], bundle: Path, admin_password: str) -> list[str]:
    controller, internal, sasl = ports
    plain = f'{PLAIN} required username="{ADMIN}" password="{admin_password}" user_{ADMIN}="{admin_password}";'
    return [
        f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}",
        f"listeners=CONTROLLER://127.0.0.1:{controller},INTERNAL://127.0.0.1:{internal},SASL_SSL://127.0.0.1:{sasl}",
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
    ]


@contextmanager
def acl_broker(ctx: StackContext, work: Path, users: list[str], *, timeout_s: float = 90.0) -> Iterator[AclBroker]:
    """Start the broker in ``work`` with a SCRAM user (random password) for each of ``users`` and for the admin;
    yield once its SASL_SSL port answers; stop it (SIGTERM, then SIGKILL)."""
    passwords = {user: secrets.token_hex(12) for user in [ADMIN, *users]}
    bundle = certificate(ctx).bundle
    scram = [f"SCRAM-SHA-512=[name={user},password={password}]" for user, password in passwords.items()]
    with private_broker(
        ctx,
        work,
        lambda ports: _listeners(ports, bundle, passwords[ADMIN]),
        name="authorizing",
        format_args=[arg for entry in scram for arg in ("--add-scram", entry)],
        log4j=_AUTHORIZER_LOG,
        timeout_s=timeout_s,
    ) as running:
        yield AclBroker(bootstrap=f"127.0.0.1:{running.ports[2]}", passwords=passwords, log=running.log)
