"""The local broker's SASL_SSL listener: its configuration, certificate from the stack's CA, and the client settings
that reach it."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509

from ops.settings import Settings
from ops.stack.services.base import StackContext
from ops.stack.services.kafka import Kafka, sasl_ssl_client_settings, scram_password
from ops.stack.settings import StackPorts, StackSettings


def _ctx(tmp_path: Path) -> StackContext:
    ports = StackPorts(kafka=19092, kafka_controller=19093, kafka_sasl_ssl=19094)
    return StackContext(Settings(stack=StackSettings(dir=tmp_path / ".stack", ports=ports)), tmp_path)


def _properties(ctx: StackContext) -> dict[str, str]:
    # A data dir already formatted: prepare() writes the configuration and stops before running the storage tool.
    logs = ctx.data_dir("kafka") / "logs"
    logs.mkdir(parents=True)
    (logs / "meta.properties").write_text("")
    Kafka().prepare(ctx)
    text = (ctx.run_dir("kafka") / "server.properties").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_the_broker_has_a_sasl_ssl_listener_besides_plaintext(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    props = _properties(ctx)
    assert props["listeners"] == ("PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093,SASL_SSL://127.0.0.1:19094")
    assert props["advertised.listeners"] == props["listeners"]
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert "SASL_SSL:SASL_SSL" in props["listener.security.protocol.map"].split(",")
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512,SCRAM-SHA-256"
    assert props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"].endswith("ScramLoginModule required;")
    assert props["listener.name.sasl_ssl.ssl.keystore.type"] == "PEM"
    assert Kafka().ports(ctx) == [19092, 19093, 19094]


def test_the_broker_certificate_comes_from_the_stack_ca_and_names_loopback(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    bundle = Path(_properties(ctx)["listener.name.sasl_ssl.ssl.keystore.location"])
    assert bundle == ctx.stack_dir / "tls" / "kafka.pem"
    pem = bundle.read_text()
    assert pem.startswith("-----BEGIN PRIVATE KEY-----") and pem.count("BEGIN CERTIFICATE") == 2
    cert = x509.load_pem_x509_certificate((ctx.stack_dir / "tls" / "kafka-cert.pem").read_bytes())
    ca = x509.load_pem_x509_certificate((ctx.stack_dir / "tls" / "ca.pem").read_bytes())
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(n) for n in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1"}
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    # Prepared again (a restart), the same certificate: clients' trust and the broker's key stay as they were.
    Kafka().prepare(ctx)
    assert bundle.read_text() == pem


def test_client_settings_for_the_listener_take_the_password_from_stack_env(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    ctx.stack_dir.mkdir(parents=True)
    (ctx.stack_dir / "stack.env").write_text("METALAKE_KAFKA__SASL_PASSWORD=from-the-file\n")
    assert scram_password(ctx) == "from-the-file"
    kafka = sasl_ssl_client_settings(ctx)
    assert (kafka.bootstrap_servers, kafka.security_protocol, kafka.sasl_mechanism, kafka.sasl_username) == (
        "127.0.0.1:19094",
        "SASL_SSL",
        "SCRAM-SHA-512",
        "metalake",
    )
    assert kafka.sasl_password is not None and kafka.sasl_password.get_secret_value() == "from-the-file"
    assert kafka.ssl_ca_location == ctx.stack_dir / "tls" / "ca.pem"
    assert "from-the-file" not in repr(kafka)
