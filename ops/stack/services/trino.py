"""Trino 476 (the last release on Maven Central) with the ``lake`` catalog: Delta Lake, file metastore, local disk;
file-based access control and resource groups.

With ``trino.https`` on (the default) Trino serves HTTPS only, with a certificate of the stack's CA (ops/stack/tls.py),
and authenticates every request: the platform's service users with a password (Trino's password file, PBKDF2 hashes
of ``trino.passwords``), people and tenants' tools with a JWT of the API's issuer (or the external one) whose
``trino.jwt.user_claim`` names the Trino user. Trino's HTTP port is disabled, not only left without authentication
(Trino refuses credentials over HTTP by default, but the port would still answer in clear). See docs/serving.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path

from metalake.java import find_java
from metalake.settings import SettingMissing
from metalake.tenancy import TENANT_ID_PATTERN
from ops.settings import Settings
from ops.stack.health import trino_probe
from ops.stack.lake_storage import trino_file_system, trino_file_system_env
from ops.stack.resource_groups import build_resource_groups, resource_groups_properties
from ops.stack.services.base import Service, ServiceError, StackContext
from ops.stack.services.seaweedfs import stack_s3
from ops.stack.services.trino_opa import access_control_file, opa_access_control_file, plugin_dir
from ops.stack.tls import server_cert
from tenants.access.rules import build_rules, write_rules
from tenants.trino_schemas import schema_namer

TRINO_VERSION = "476"
# Trino 476 needs JDK 24+; it runs on the Temurin 25 JDK (it checks a minimum version only).
_MIN_JAVA = 24

_JVM_OPTIONS = [
    "-server",
    "-Xmx2G",
    "-XX:+UseG1GC",
    "-XX:G1HeapRegionSize=32M",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:-OmitStackTraceInFastThrow",
    "-XX:ReservedCodeCacheSize=256M",
    "-XX:PerMethodRecompilationCutoff=10000",
    "-XX:PerBytecodeRecompilationCutoff=10000",
    "-XX:+EnableDynamicAgentLoading",
    "-Djdk.attach.allowAttachSelf=true",
    "-Djdk.nio.maxCachedBufferSize=2000000",
    "-Dfile.encoding=UTF-8",
]
# Trino's file authenticator takes bcrypt or PBKDF2 hashes; PBKDF2 needs nothing beyond hashlib. Trino 476 checks
# PBKDF2 with HMAC-SHA1 (still sound for PBKDF2), written ``<iterations>:<salt hex>:<hash hex>``.
PBKDF2_ITERATIONS = 100_000
# Trino's JWT user mapping (etc/), when a token's user comes from its tenant claim (:func:`user_from_tenant_claim`).
JWT_USER_MAPPING = "jwt-user-mapping.json"


def cli_jar(stack_dir: Path) -> Path:
    """The Trino CLI's executable jar deploy/local/fetch/trino.sh keeps in the stack's cache."""
    return stack_dir / "cache" / "trino" / f"trino-cli-{TRINO_VERSION}.jar"


def pbkdf2_hash(password: str, *, salt: bytes | None = None, iterations: int = PBKDF2_ITERATIONS) -> str:
    """A password hash in the form Trino's password file reads."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha1", password.encode(), salt, iterations)
    return f"{iterations}:{salt.hex()}:{digest.hex()}"


def service_users(settings: Settings) -> list[str]:
    """The users that authenticate with a password: the platform user and the other service users."""
    return list(dict.fromkeys([settings.trino.user, *settings.access.service_users]))


def password_file(settings: Settings) -> str:
    """``password.db``: one ``user:hash`` line per service user; a user without a password is an error."""
    lines = []
    for user in service_users(settings):
        secret = settings.trino.passwords.get(user)
        if secret is None:
            raise ServiceError(f"trino: no password for service user {user!r} in trino.passwords (stack.env)")
        lines.append(f"{user}:{pbkdf2_hash(secret.get_secret_value())}")
    return "\n".join(lines) + "\n"


def user_from_tenant_claim(settings: Settings) -> bool:
    """Whether Trino takes a token's user from its tenant claim (``tenant.<claim>``), not from ``user_claim``: by
    default with an external issuer, whose tenant and user claims metalake cannot keep consistent."""
    jwt = settings.trino.jwt
    if jwt.user_from == "auto":
        return settings.api.external_issuer is not None
    return jwt.user_from == "tenant_claim"


def jwt_user_mapping() -> dict[str, object]:
    """Trino's user-mapping file for :func:`user_from_tenant_claim`: a tenant id (as validated) becomes its plain
    Trino user; any other value matches no rule, and Trino refuses the token."""
    return {"rules": [{"pattern": f"({TENANT_ID_PATTERN.pattern})", "user": "tenant.$1", "allow": True}]}


def jwt_properties(settings: Settings, mapping_file: Path | None = None) -> list[str]:
    """The JWT authenticator's lines of config.properties: the JWKS, issuer and audience of the API's issuer unless
    ``trino.jwt`` sets them (an external issuer's JWKS URL must be set: Trino does not read discovery documents).
    ``mapping_file`` holds :func:`jwt_user_mapping` when the user comes from the tenant claim."""
    jwt, api = settings.trino.jwt, settings.api
    issuer = jwt.issuer or api.external_issuer or api.issuer_url
    if jwt.jwks_url:
        jwks = jwt.jwks_url
    elif api.external_issuer:
        raise SettingMissing(
            "settings: trino.jwt.jwks_url is unset; with api.external_issuer set, set METALAKE_TRINO__JWT__JWKS_URL "
            "to the issuer's jwks_uri"
        )
    else:
        jwks = api.issuer_url.rstrip("/") + "/.well-known/jwks.json"
    lines = [
        f"http-server.authentication.jwt.key-file={jwks}",
        f"http-server.authentication.jwt.required-issuer={issuer}",
        f"http-server.authentication.jwt.required-audience={jwt.audience or api.audience}",
    ]
    if user_from_tenant_claim(settings):
        if mapping_file is None:
            raise ValueError("the user comes from the tenant claim: a user-mapping file is needed")
        lines.append(f"http-server.authentication.jwt.principal-field={api.tenant_claim}")
        lines.append(f"http-server.authentication.jwt.user-mapping.file={mapping_file}")
        return lines
    lines.append(f"http-server.authentication.jwt.principal-field={jwt.user_claim}")
    if jwt.user_mapping_pattern:
        lines.append(f"http-server.authentication.jwt.user-mapping.pattern={jwt.user_mapping_pattern}")
    return lines


def server_properties(settings: Settings, *, host: str, port: int, etc: Path, keystore: Path | None) -> list[str]:
    """The listener and authentication lines of config.properties: HTTPS only with password and JWT authenticators
    (``keystore`` given, ``trino.https`` on), or the plain HTTP port (``trino.https`` off)."""
    if not settings.trino.https:
        return [f"http-server.http.port={port}", f"discovery.uri=http://{host}:{port}"]
    if keystore is None:
        raise ValueError("HTTPS needs a keystore")
    secret = settings.trino.shared_secret
    if secret is None:
        raise ServiceError("trino: trino.shared_secret is unset (stack.env): HTTPS with authentication needs it")
    authenticators = ["PASSWORD", "JWT"] if settings.trino.jwt.enabled else ["PASSWORD"]
    lines = [
        # No HTTP listener at all: nothing is served in clear, whatever the other flags say.
        "http-server.http.enabled=false",
        "http-server.https.enabled=true",
        f"http-server.https.port={port}",
        f"http-server.https.keystore.path={keystore}",
        f"discovery.uri=https://{host}:{port}",
        # The node then announces (and reaches) itself over HTTPS: without it, it never finds itself in discovery.
        "internal-communication.https.required=true",
        f"internal-communication.shared-secret={secret.get_secret_value()}",
        f"http-server.authentication.type={','.join(authenticators)}",
        f"password-authenticator.config-files={etc / 'password-authenticator.properties'}",
    ]
    if settings.trino.jwt.enabled:
        lines += jwt_properties(settings, etc / JWT_USER_MAPPING)
    return lines


class Trino(Service):
    name = "trino"

    def ports(self, ctx: StackContext) -> list[int]:
        return [ctx.settings.stack.ports.trino]

    def needs_at_start(self, ctx: StackContext) -> tuple[str, ...]:
        # Trino fetches the JWKS while it starts and does not start without it: with the API's own issuer, the
        # local API must answer first (an external issuer's JWKS is the issuer's business).
        trino, api = ctx.settings.trino, ctx.settings.api
        own_issuer = trino.jwt.jwks_url is None and api.external_issuer is None
        jwks = ("api",) if trino.https and trino.jwt.enabled and own_issuer else ()
        # A lake on S3 holds Trino's file metastore: the local object store must answer when Trino reads it.
        return (*jwks, "seaweedfs") if ctx.settings.lake_on_s3 else jwks

    def companions(self, ctx: StackContext) -> tuple[str, ...]:
        # With access.mode=opa every access check is the access processor's decision: no query runs without it.
        return ("access",) if ctx.settings.access.mode == "opa" else ()

    def fetch(self, ctx: StackContext) -> None:
        ctx.run_fetch_script("trino", self.name)
        find_java(_MIN_JAVA, env_var="METALAKE_TRINO_JAVA_HOME")

    def prepare(self, ctx: StackContext) -> None:
        etc = ctx.run_dir(self.name) / "etc"
        (etc / "catalog").mkdir(parents=True, exist_ok=True)
        data = ctx.data_dir(self.name)
        data.mkdir(parents=True, exist_ok=True)
        server = ctx.cache_dir("trino") / "server"
        settings = ctx.settings
        keystore = None
        if settings.trino.https:
            keystore = server_cert(ctx.stack_dir / "tls", "trino", ["localhost", "127.0.0.1", ctx.host]).bundle
            _write_private(etc / "password.db", password_file(settings))
            if settings.trino.jwt.enabled and user_from_tenant_claim(settings):
                (etc / JWT_USER_MAPPING).write_text(json.dumps(jwt_user_mapping(), indent=1) + "\n")
            (etc / "password-authenticator.properties").write_text(
                f"password-authenticator.name=file\nfile.password-file={etc / 'password.db'}\n"
            )
        listener = server_properties(
            settings, host=ctx.host, port=settings.stack.ports.trino, etc=etc, keystore=keystore
        )
        access_files = ",".join(str(f) for f in self._prepare_access_control(ctx, etc))
        _write_private(
            etc / "config.properties",
            "\n".join(
                [
                    "coordinator=true",
                    "node-scheduler.include-coordinator=true",
                    *listener,
                    "query.max-memory=1GB",
                    # Every query's execution time: tenants' users may not set the session property (rules.json).
                    f"query.max-execution-time={settings.trino.resource_groups.query_max_execution_s}s",
                    "query.max-memory-per-node=512MB",
                    "task.concurrency=2",
                    f"plugin.dir={plugin_dir(ctx, server)}",
                    f"catalog.config-dir={etc / 'catalog'}",
                    f"access-control.config-files={access_files}",
                    "",
                ]
            ),
        )
        self._prepare_resource_groups(ctx, etc)
        (etc / "log.properties").write_text("io.trino=INFO\n")
        # The file metastore lives inside the lake root, in a folder no tenant id can name (ids start with a letter).
        (etc / "catalog" / "lake.properties").write_text(
            "\n".join(
                [
                    "connector.name=delta_lake",
                    "hive.metastore=file",
                    *trino_file_system(ctx.settings, stack_s3(ctx)),
                    "delta.register-table-procedure.enabled=true",
                    "delta.enable-non-concurrent-writes=true",
                    "",
                ]
            )
        )

    def _prepare_access_control(self, ctx: StackContext, etc: Path) -> list[Path]:
        """File-based access control, reloaded every second: ``metalake access`` rewrites the rules as tenants and
        their PII tags change. A missing rules file starts as service users only (no tenant reads anything yet).
        With ``access.mode=opa``: the rules that name no tenant, and the access processor's decisions beside them
        (``ops.stack.services.trino_opa``). Returns the access-control files, in Trino's order."""
        settings = ctx.settings
        if settings.access.mode == "opa":
            return [access_control_file(settings, etc), opa_access_control_file(settings, etc)]
        access_control_file(settings, etc)
        rules_file = settings.access_rules_file
        if not rules_file.is_file():
            write_rules(
                rules_file,
                build_rules(
                    service_users(settings),
                    [],
                    catalog=settings.trino.catalog,
                    schemas=schema_namer(settings),
                    impersonator=settings.trino.user,
                ),
            )
        return [etc / "access-control.properties"]

    def _prepare_resource_groups(self, ctx: StackContext, etc: Path) -> None:
        """One resource group per tenant (ops/stack/resource_groups.py). Trino reads ``etc/resource-groups.properties``
        relative to its working directory (the run folder, :meth:`cwd`), once at start: a change needs a restart."""
        groups = etc / "resource-groups.json"
        groups.write_text(json.dumps(build_resource_groups(ctx.settings.trino.resource_groups), indent=1) + "\n")
        (etc / "resource-groups.properties").write_text(resource_groups_properties(groups))

    def argv(self, ctx: StackContext) -> list[str]:
        server = ctx.cache_dir("trino") / "server"
        etc = ctx.run_dir(self.name) / "etc"
        java = find_java(_MIN_JAVA, env_var="METALAKE_TRINO_JAVA_HOME")
        return [
            str(java),
            "-cp",
            str(server / "lib" / "*"),
            *_JVM_OPTIONS,
            "-Dnode.environment=metalake_local",
            "-Dnode.id=metalake-local-1",
            f"-Dnode.data-dir={ctx.data_dir(self.name)}",
            f"-Dconfig={etc / 'config.properties'}",
            f"-Dlog.levels-file={etc / 'log.properties'}",
            "io.trino.server.TrinoServer",
        ]

    def env(self, ctx: StackContext) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("JAVA_TOOL_OPTIONS", None)
        return env | trino_file_system_env(ctx.settings, stack_s3(ctx))

    def probe(self, ctx: StackContext) -> str | None:
        trino = ctx.settings.trino
        # As every client verifies it: the configured CA (stack.env names the stack's own).
        ca = (trino.ca_file or ctx.stack_dir / "tls" / "ca.pem") if trino.https else None
        return trino_probe(ctx.host, ctx.settings.stack.ports.trino, ca_file=ca)


def _write_private(path: Path, text: str) -> None:
    """Owner-only (the file holds a secret or its hash), created so: never briefly readable by others."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    path.chmod(0o600)
