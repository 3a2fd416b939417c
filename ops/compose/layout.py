"""Where a Compose deployment's pieces are: its ports, the paths inside the containers, the state folder on the host
(configuration, TLS material, generated secrets, data), and the settings each metalake container gets.

Secrets are files under ``<state>/secrets`` (mounted as Compose secrets at ``/run/secrets/<name>``) that the
processes read through ``METALAKE_<SETTING>_FILE`` (metalake.secret_files); no secret is an environment variable.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, replace
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
# The lake root of a deployment with SeaweedFS (``generate --s3``): a bucket of its own, the tables under a prefix.
S3_LAKE_ROOT = "s3a://metalake-lake/lake"

# A secret's file name (and Compose secret name) -> the setting that reads it (None: a service's own, not a setting).
SECRET_SETTINGS: dict[str, str | None] = {
    "api_key_encryption_key": "METALAKE_API__KEY_ENCRYPTION_KEY",
    "kafka_sasl_password": "METALAKE_KAFKA__SASL_PASSWORD",
    "trino_passwords": "METALAKE_TRINO__PASSWORDS",
    "trino_shared_secret": None,
    "postgres_password": None,
}
# The same for a deployment with SeaweedFS: the one S3 identity's key pair and SeaweedFS's identities file (its S3
# gateway reads the keys from there).
S3_SECRET_SETTINGS: dict[str, str | None] = {
    "s3_access_key_id": "METALAKE_LAKE__S3__ACCESS_KEY_ID",
    "s3_secret_access_key": "METALAKE_LAKE__S3__SECRET_ACCESS_KEY",
}
SEAWEEDFS_IDENTITIES = "seaweedfs_s3_config"


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
    # SeaweedFS (``generate --s3`` only): its S3 gateway and the master, volume and filer servers behind it, each
    # with its gRPC port (SeaweedFS's own default: 10000 above; explicit, so that a port block holds them all).
    s3: int = 8333
    seaweedfs_master: int = 9333
    seaweedfs_volume: int = 8381
    seaweedfs_filer: int = 8888
    s3_grpc: int = 18333
    seaweedfs_master_grpc: int = 19333
    seaweedfs_volume_grpc: int = 18381
    seaweedfs_filer_grpc: int = 18888


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
    s3=29333,
    seaweedfs_master=29334,
    seaweedfs_volume=29335,
    seaweedfs_filer=29336,
    s3_grpc=29343,
    seaweedfs_master_grpc=29344,
    seaweedfs_volume_grpc=29345,
    seaweedfs_filer_grpc=29346,
)
#: The same layout in 27xxx, for a host that runs the local stack and another deployment on 29xxx; FerretDB moves
#: off 27017, the local stack's (and MongoDB's) default port.
BLOCK_27 = replace(Ports(**{k: v - 2000 for k, v in vars(BLOCK_29).items()}), ferretdb=27027)
PORT_SETS = {"default": Ports(), "block29": BLOCK_29, "block27": BLOCK_27}


def settings_env(ports: Ports, *, s3: bool = False) -> dict[str, str]:
    """The settings every metalake container shares. The ``_FILE`` variables of the secrets are set per service in
    compose.yaml (and compose.s3.yaml), beside the secrets it mounts: each process gets only those it uses. With
    ``s3`` the lake root is a bucket of the deployment's SeaweedFS."""
    return {
        **(s3_settings_env(ports) if s3 else {}),
        "METALAKE_KAFKA__BOOTSTRAP_SERVERS": f"127.0.0.1:{ports.kafka}",
        "METALAKE_KAFKA__SASL_USERNAME": "metalake",
        "METALAKE_KAFKA__SSL_CA_LOCATION": CA,
        "METALAKE_MONGO__URI": f"mongodb://127.0.0.1:{ports.ferretdb}/",
        "METALAKE_TRINO__HOST": "127.0.0.1",
        "METALAKE_TRINO__PORT": str(ports.trino),
        "METALAKE_TRINO__CA_FILE": CA,
        "METALAKE_LAKE__ROOT": S3_LAKE_ROOT if s3 else LAKE,
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


def s3_settings_env(ports: Ports) -> dict[str, str]:
    """How the processes reach the deployment's SeaweedFS (its key pair: ``_FILE`` variables, per service)."""
    return {
        "METALAKE_LAKE__S3__ENDPOINT": f"http://127.0.0.1:{ports.s3}",
        "METALAKE_LAKE__S3__PATH_STYLE": "true",
    }


def secret_settings(*, s3: bool) -> dict[str, str | None]:
    """The deployment's secrets (file name -> the setting that reads it)."""
    return {**SECRET_SETTINGS, **(S3_SECRET_SETTINGS if s3 else {})}


def host_env(ports: Ports, state: Path, *, s3: bool = False) -> dict[str, str]:
    """What a tool on the host (``metalake demo``) sets to reach the deployment: the same addresses, the CA and the
    secrets at their host paths, and the state folder as its stack folder (the demo keeps its admin client there)."""
    env = settings_env(ports, s3=s3)
    env.update({f"{var}_FILE": str(state / "secrets" / name) for name, var in secret_settings(s3=s3).items() if var})
    env["METALAKE_KAFKA__SSL_CA_LOCATION"] = env["METALAKE_TRINO__CA_FILE"] = str(state / "tls" / "ca.pem")
    env["METALAKE_STACK__DIR"] = str(state)
    return env


def ensure_secrets(folder: Path, trino_users: list[str], *, s3: bool = False) -> dict[str, str]:
    """Every secret of :func:`secret_settings`, generated once (URL-safe: they go into URLs and property files) and
    kept across runs; Trino's passwords gain a password for a service user added since. With ``s3``, SeaweedFS's
    identities file too, rendered from the key pair. Returns them by name."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    out: dict[str, str] = {}
    for name in secret_settings(s3=s3):
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
    if s3:
        out[SEAWEEDFS_IDENTITIES] = _seaweedfs_identities(folder / SEAWEEDFS_IDENTITIES, out)
    return out


def _seaweedfs_identities(path: Path, keys: dict[str, str]) -> str:
    """SeaweedFS's ``-s3.config``: one identity, the processes' key pair (anonymous requests are refused), as the
    local stack configures it (ops/stack/services/seaweedfs.py)."""
    identity = {
        "name": "metalake",
        "credentials": [{"accessKey": keys["s3_access_key_id"], "secretKey": keys["s3_secret_access_key"]}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }
    value = json.dumps({"identities": [identity]}, sort_keys=True)
    if not path.is_file() or path.read_text() != value:
        write_private(path, value)
    return value


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
