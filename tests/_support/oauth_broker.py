"""A Kafka broker of its own whose SASL_SSL listener takes OAUTHBEARER tokens, validated against a JWKS URL.

The stack's broker cannot be the one: Kafka (4.3) fetches the JWKS when the listener is configured and refuses to
start if the URL does not answer, and the stack starts Kafka before the API whose JWKS it would trust. So the tests
start this one after the API, from the stack's cached Kafka jars and with the stack CA's certificate, exactly as a
production broker trusting the API's issuer (or an external IdP) would be configured. KRaft, one node, free ports.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ops.stack.services.base import StackContext
from ops.stack.services.kafka import certificate
from tests._support.private_broker import private_broker

JWT_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
ALLOWED_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"


@dataclass(frozen=True)
class OAuthBroker:
    bootstrap: str  # the SASL_SSL (OAUTHBEARER) listener
    log: Path

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.is_file() else ""


def _listeners(ports: list[int], bundle: Path, jwks_url: str, issuer: str, audience: str) -> list[str]:
    plain, controller, sasl = ports
    return [
        f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}",
        f"listeners=PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{controller},SASL_SSL://127.0.0.1:{sasl}",
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
    ]


@contextmanager
def oauth_broker(
    ctx: StackContext, work: Path, *, jwks_url: str, issuer: str, audience: str, timeout_s: float = 90.0
) -> Iterator[OAuthBroker]:
    """Start the broker in ``work``, yield once its SASL_SSL port answers, stop it (SIGTERM, then SIGKILL)."""
    bundle = certificate(ctx).bundle
    with private_broker(
        ctx,
        work,
        lambda ports: _listeners(ports, bundle, jwks_url, issuer, audience),
        name="OAUTHBEARER",
        jvm_args=[f"-D{ALLOWED_URLS}={jwks_url}"],
        timeout_s=timeout_s,
    ) as running:
        yield OAuthBroker(bootstrap=f"127.0.0.1:{running.ports[2]}", log=running.log)
