"""``python -m ops.compose generate STATE [--ports default|block29|block27] [--tag TAG] [--s3]`` and
``python -m ops.compose init``."""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path

from metalake.lake_uri import S3Path
from metalake.s3 import S3Client
from ops.compose import configs, layout
from ops.settings import Settings
from ops.stack.services.trino import service_users


def _settings(env: Mapping[str, str]) -> Settings:
    """Settings as the containers read them, but with the host's paths to the secrets (the caller's METALAKE_*
    variables set aside: the deployment's own values only)."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.upper().startswith("METALAKE_")}
    try:
        os.environ.update(env)
        return Settings(_env_file=None)
    finally:
        for k in env:
            os.environ.pop(k, None)
        os.environ.update(saved)


def _compose_env(state: Path, ports: layout.Ports, tag: str, s3: bool) -> dict[str, str]:
    """Compose's own variables (``--env-file``): the state folder, the image tag, whether SeaweedFS holds the lake
    (compose.sh then adds compose.s3.yaml), the services' ports, the KRaft cluster id (kept: a new one would not match
    the formatted storage)."""
    kept = _read_env(state / ".env")
    return {
        "METALAKE_STATE": str(state),
        "METALAKE_TAG": tag,
        "METALAKE_S3": "true" if s3 else "false",
        "KAFKA_CLUSTER_ID": kept.get("KAFKA_CLUSTER_ID") or uuid.uuid4().hex[:22],
        **{f"PORT_{name.upper()}": str(value) for name, value in vars(ports).items()},
    }


def _read_env(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    pairs = (line.partition("=") for line in path.read_text().splitlines() if "=" in line)
    return {k: v for k, _, v in pairs}


def generate(state: Path, ports: layout.Ports, tag: str, *, s3: bool = False) -> None:
    """The state folder; with ``s3`` the lake is a bucket of the deployment's SeaweedFS (compose.s3.yaml)."""
    state = state.resolve()
    state.mkdir(parents=True, exist_ok=True)
    host = layout.host_env(ports, state, s3=s3)
    first = _settings({k: v for k, v in host.items() if not k.endswith("_FILE")})
    layout.ensure_secrets(state / "secrets", service_users(first), s3=s3)
    # Only Trino's configuration holds its internal shared secret: no process reads it.
    settings = _settings({**host, "METALAKE_TRINO__SHARED_SECRET_FILE": str(state / "secrets" / "trino_shared_secret")})
    configs.tls(state)
    configs.kafka(state, ports)
    configs.trino(state, settings, ports)
    configs.data(state, settings, s3=s3)
    (state / "metalake.env").write_text(layout.env_lines(layout.settings_env(ports, s3=s3), quoted=False))
    (state / "host.env").write_text(layout.env_lines(host, quoted=True))
    (state / ".env").write_text(layout.env_lines(_compose_env(state, ports, tag, s3), quoted=False))
    print(f"compose state ready in {state}")  # noqa: T201 - the command's answer


def init() -> None:
    """The broker's SCRAM user (both mechanisms, for the SASL_SSL listener), the platform's topics and, for a lake on
    S3, its bucket; idempotent."""
    from ops.stack.manager import create_platform_topics
    from ops.stack.services.base import StackContext
    from ops.stack.services.kafka import ensure_scram_user

    settings = Settings(_env_file=None)
    host, port = settings.kafka_bootstrap.rsplit(":", 1)
    settings.stack.host, settings.stack.ports.kafka = host, int(port)
    user = ensure_scram_user(StackContext(settings, Path("/")))
    created = create_platform_topics(settings)
    print(f"kafka: SCRAM user {user!r}; topics created: {', '.join(created) or 'none (all there)'}")  # noqa: T201
    root = settings.lake_root
    if isinstance(root, S3Path):
        client = S3Client.from_settings(settings.lake.s3, settings.lake.s3.request_timeout_s)
        made = client.create_bucket(root.bucket)
        print(f"lake: bucket {root.bucket!r} {'created' if made else 'already there'}")  # noqa: T201


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.compose")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="render the state folder of a Compose deployment")
    gen.add_argument("state", type=Path)
    gen.add_argument("--ports", choices=sorted(layout.PORT_SETS), default="default")
    gen.add_argument("--tag", default="dev")
    gen.add_argument("--s3", action="store_true", help="the lake in the deployment's SeaweedFS (compose.s3.yaml)")
    sub.add_parser("init", help="the deployment's one-shot job: SCRAM user and topics")
    args = parser.parse_args(argv)
    if args.command == "generate":
        generate(args.state, layout.PORT_SETS[args.ports], args.tag, s3=args.s3)
    else:
        init()
    return 0


if __name__ == "__main__":
    sys.exit(main())
