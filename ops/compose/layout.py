"""Where a Compose deployment's pieces are: its ports, the paths inside the containers, the state folder on the host
(configuration, TLS material, generated secrets, data), and the settings each metalake container gets.

Secrets are files under ``<state>/secrets`` (mounted as Compose secrets at ``/run/secrets/<name>``) that the
processes read through ``METALAKE_<SETTING>_FILE`` (metalake.secret_files); no secret is an environment variable.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

# Every image runs as this user (deploy/images/Containerfile); the state folder's data and secrets are its own.
UID = 10001

# Paths inside the containers.
LAKE = "/var/lib/metalake/lake"
CHECKPOINTS = "/var/lib/metalake/checkpoints"
RULES = "/var/lib/metalake/access/rules.json"
SPARK_SCRATCH = "/tmp/metalake-spark"  # noqa: S108 - the containers' own tmpfs
CA = "/etc/metalake/tls/ca.pem"
SECRETS = "/run/secrets"
TRINO_HOME = "/srv/trino"

# A secret's file name (and Compose secret name) -> the setting that reads it (None: a service's own, not a setting).
SECRET_SETTINGS: dict[str, str | None] = {
    "api_key_encryption_key": "METALAKE_API__KEY_ENCRYPTION_KEY",
    "kafka_sasl_password": "METALAKE_KAFKA__SASL_PASSWORD",
    "trino_passwords": "METALAKE_TRINO__PASSWORDS",
    "trino_shared_secret": None,
    "postgres_password": None,
}


@dataclass(frozen=True)
class Ports:
    """The host ports (host networking: every container listens on the host's loopback)."""

    kafka: int = 9092
    kafka_controller: int = 9093
    kafka_sasl_ssl: int = 9094
    postgres: int = 5432
    ferretdb: int = 27017
    trino: int = 8443
    api: int = 8000
    connect: int = 8083
    enrichment_health: int = 9101
    propagation_health: int = 9102
    outbound_health: int = 9103
    access_health: int = 9104
    lake_worker_health: int = 9105


#: One port block (29xxx), for a host that already runs the local stack on the default ports.
BLOCK_29 = Ports(
    kafka=29092,
    kafka_controller=29093,
    kafka_sasl_ssl=29094,
    postgres=29432,
    ferretdb=29017,
    trino=29080,
    api=29000,
    connect=29083,
    enrichment_health=29101,
    propagation_health=29102,
    outbound_health=29103,
    access_health=29104,
    lake_worker_health=29105,
)
PORT_SETS = {"default": Ports(), "block29": BLOCK_29}


def settings_env(ports: Ports) -> dict[str, str]:
    """The settings every metalake container shares. The ``_FILE`` variables of the secrets are set per service in
    compose.yaml, beside the secrets it mounts: each process gets only those it uses."""
    return {
        "METALAKE_KAFKA__BOOTSTRAP_SERVERS": f"127.0.0.1:{ports.kafka}",
        "METALAKE_KAFKA__SASL_USERNAME": "metalake",
        "METALAKE_KAFKA__SSL_CA_LOCATION": CA,
        "METALAKE_MONGO__URI": f"mongodb://127.0.0.1:{ports.ferretdb}/",
        "METALAKE_TRINO__HOST": "127.0.0.1",
        "METALAKE_TRINO__PORT": str(ports.trino),
        "METALAKE_TRINO__CA_FILE": CA,
        "METALAKE_LAKE__ROOT": LAKE,
        "METALAKE_LAKE__CHECKPOINT_ROOT": CHECKPOINTS,
        "METALAKE_ACCESS__RULES_FILE": RULES,
        "METALAKE_SPARK__SCRATCH_DIR": SPARK_SCRATCH,
        "METALAKE_API__PORT": str(ports.api),
        "METALAKE_CONNECT__PORT": str(ports.connect),
        "METALAKE_STACK__PORTS__POSTGRES": str(ports.postgres),
        "METALAKE_HEALTH__PORTS__ENRICHMENT": str(ports.enrichment_health),
        "METALAKE_HEALTH__PORTS__PROPAGATION": str(ports.propagation_health),
        "METALAKE_HEALTH__PORTS__OUTBOUND": str(ports.outbound_health),
        "METALAKE_HEALTH__PORTS__ACCESS": str(ports.access_health),
        "METALAKE_HEALTH__PORTS__LAKE_WORKER": str(ports.lake_worker_health),
        # The demo's webhook receiver listens on loopback: a deployment without the demo removes these two.
        "METALAKE_OUTBOUND__SSRF_ALLOW": '["127.0.0.1/32"]',
        "METALAKE_CONNECT__SSRF_ALLOW": '["127.0.0.1/32"]',
        "METALAKE_TELEMETRY__LOG_FORMAT": "json",
    }


def host_env(ports: Ports, state: Path) -> dict[str, str]:
    """What a tool on the host (``metalake demo``) sets to reach the deployment: the same addresses, the CA and the
    secrets at their host paths, and the state folder as its stack folder (the demo keeps its admin client there)."""
    env = settings_env(ports)
    env.update({f"{var}_FILE": str(state / "secrets" / name) for name, var in SECRET_SETTINGS.items() if var})
    env["METALAKE_KAFKA__SSL_CA_LOCATION"] = env["METALAKE_TRINO__CA_FILE"] = str(state / "tls" / "ca.pem")
    env["METALAKE_STACK__DIR"] = str(state)
    return env


def ensure_secrets(folder: Path, trino_users: list[str]) -> dict[str, str]:
    """Every secret of :data:`SECRET_SETTINGS`, generated once (URL-safe: they go into URLs and property files) and
    kept across runs; Trino's passwords gain a password for a service user added since. Returns them by name."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    out: dict[str, str] = {}
    for name in SECRET_SETTINGS:
        path = folder / name
        kept = path.read_text() if path.is_file() else ""
        if name == "trino_passwords":
            passwords = json.loads(kept) if kept else {}
            value = json.dumps({u: passwords.get(u) or secrets.token_urlsafe(24) for u in trino_users}, sort_keys=True)
        else:
            value = kept or secrets.token_urlsafe(32)
        if value != kept:
            write_private(path, value)
        out[name] = value
    return out


def write_private(path: Path, text: str, owner: int | None = UID) -> None:
    """A file only its owner reads, created so (never briefly readable by others); owned by the containers' user
    when we are root (bind mounts keep the host's owner)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    path.chmod(0o400)
    chown(path, owner)


def chown(path: Path, owner: int | None = UID) -> None:
    if owner is not None and os.geteuid() == 0:
        os.chown(path, owner, owner)


def env_lines(env: dict[str, str], *, quoted: bool) -> str:
    """``KEY=value`` lines: raw for podman's ``--env-file`` (it keeps quotes), shell-quoted for ``source``."""
    import shlex

    return "".join(f"{k}={shlex.quote(v) if quoted else v}\n" for k, v in sorted(env.items()))
