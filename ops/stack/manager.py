"""``metalake stack up|down|status|logs``: orchestration of the services in deploy order, with timeouts everywhere."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from metalake.java import JavaNotFound
from ops.settings import Settings
from ops.stack import process
from ops.stack.fetching import Fetches
from ops.stack.health import port_free
from ops.stack.launcher import LocalProcessLauncher
from ops.stack.services import SERVICES, Service, StackContext
from ops.stack.services.base import ServiceError
from ops.stack.services.jaeger import trace_env
from ops.stack.services.kafka import ensure_scram_user, scram_user
from ops.stack.services.trino import service_users
from tenants.naming import CHANGES_TOPIC, CONNECT_OFFSETS_TOPIC, OUTBOUND_TESTS_TOPIC, dlq_topic, event_topics

Echo = Callable[[str], None]


# Local secrets generated once into .stack/stack.env (kept across `up`s, never printed), so a fresh clone runs the
# API with no manual step: the key that seals the API's token signing keys, Trino's internal shared secret, the local
# Spark cluster's RPC secret, the password of the broker's SCRAM user (its SASL_SSL listener), the S3 key pair of the
# local SeaweedFS's only identity (a lake on S3), generated whatever the lake so it never changes under data SeaweedFS
# already holds; the bearer token of the processes' /metrics (Prometheus reads it from a file of its own).
GENERATED_SECRETS = (
    "METALAKE_API__KEY_ENCRYPTION_KEY",
    "METALAKE_TRINO__SHARED_SECRET",
    "METALAKE_SPARK__AUTH_SECRET",
    "METALAKE_KAFKA__SASL_PASSWORD",
    "METALAKE_LAKE__S3__ACCESS_KEY_ID",
    "METALAKE_LAKE__S3__SECRET_ACCESS_KEY",
    "METALAKE_TELEMETRY__METRICS_TOKEN",
    # The key in the lake decisions' path (access.mode=opa): Trino's OPA URIs and the access processor share it.
    "METALAKE_ACCESS__DECISIONS__KEY",
)
# The Trino service users' passwords: one JSON object (user -> password), a user added later gets one at the next up.
TRINO_PASSWORDS = "METALAKE_TRINO__PASSWORDS"


class StackError(RuntimeError):
    """Something in the stack failed; the message names the service and the log to read."""


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    state: str  # running | stopped | unhealthy
    pid: int | None
    ports: list[int]
    detail: str
    log: Path


class StackManager:
    def __init__(self, settings: Settings, repo_dir: Path, echo: Echo = print) -> None:
        self._ctx = StackContext(settings, repo_dir)
        self._echo = echo

    @property
    def context(self) -> StackContext:
        return self._ctx

    def _select(self, names: Sequence[str] | None, with_job: bool, with_processors: bool = False) -> list[Service]:
        needs = {s.name: (*s.requires, *s.needs_at_start(self._ctx), *s.companions(self._ctx)) for s in SERVICES}
        if names is not None:  # an empty list selects nothing; None selects the default set
            _check_known(names)
            wanted = with_requirements(names, needs)
            return [s for s in SERVICES if s.name in wanted]
        # The processors read what the job writes, so asking for them implies the job.
        with_job = with_job or with_processors
        default = [
            s.name
            for s in SERVICES
            if (s.started_by_default(self._ctx) if s.infrastructure else (with_processors if s.processor else with_job))
        ]
        wanted = with_requirements(default, needs)
        return [s for s in SERVICES if s.name in wanted]

    def _pid_file(self, service: Service) -> Path:
        return self._ctx.run_dir(service.name) / "pid"

    def _record(self, service: Service) -> process.PidRecord | None:
        record = process.PidRecord.read(self._pid_file(service))
        return record if record is not None and process.alive(record) else None

    # -- up -------------------------------------------------------------------------------------------------------

    def up(self, names: Sequence[str] | None = None, *, with_job: bool = False, with_processors: bool = False) -> None:
        started = time.monotonic()
        selected = self._select(names, with_job, with_processors)
        # Every port before anything is fetched or started: a taken port of the last service must not leave the
        # first ones half started.
        for service in selected:
            if self._record(service) is None:
                self._check_ports_free(service)
        # Before any service starts: the API reads its generated key from this file.
        self._write_env_file()
        # Every download and build at once; the services still start one after the other, each once its own is done.
        fetches = Fetches(self._ctx, self._echo)
        fetches.start([s for s in selected if self._record(s) is None])
        for service in selected:
            self._up_one(service, fetches)
        self._echo(f"stack is up ({time.monotonic() - started:.1f}s); stop it with: metalake stack down")

    def _up_one(self, service: Service, fetches: Fetches) -> None:
        ctx, name = self._ctx, service.name
        if self._record(service) is not None:
            reason = service.probe(ctx)
            if reason is None:
                self._echo(f"{name:11} already running")
                if name == "kafka":
                    # stack.env's password may be newer than the broker's user (a checkout that had no such line):
                    # the upsert is cheap and keeps the two equal.
                    ensure_scram_user(ctx)
                return
            raise StackError(f"{name}: running but unhealthy ({reason}); see {ctx.log_file(name)}")
        self._check_ports_free(service)
        t0 = time.monotonic()
        try:
            fetches.wait(service)
            service.prepare(ctx)
            argv = service.argv(ctx)
        except (ServiceError, JavaNotFound) as exc:
            raise StackError(str(exc)) from exc
        fetched = time.monotonic() - t0
        ports = ",".join(str(p) for p in service.ports(ctx)) or "-"
        self._echo(f"{name:11} fetched/configured in {fetched:.1f}s; starting on {ctx.host}:{ports}")
        record, proc = process.spawn(
            argv,
            log_file=ctx.log_file(name),
            pid_file=self._pid_file(service),
            cwd=service.cwd(ctx),
            env=service.env(ctx),
        )
        self._wait_healthy(service, record, proc)
        if name == "kafka":
            user = ensure_scram_user(ctx)
            self._echo(
                f"{'kafka':11} SCRAM user {user!r} (SASL_SSL on {ctx.host}:{ctx.settings.stack.ports.kafka_sasl_ssl})"
            )
            self._create_topics()
        self._echo(f"{name:11} healthy (pid {record.pid}) in {time.monotonic() - t0:.1f}s")

    def _check_ports_free(self, service: Service) -> None:
        ctx = self._ctx
        for port in service.ports(ctx):
            if not port_free(ctx.host, port):
                raise StackError(
                    f"{service.name}: port {ctx.host}:{port} is in use by another process; stop it or choose another "
                    f"port (e.g. {service.port_variable()}=<port>)"
                )

    def _wait_healthy(self, service: Service, record: process.PidRecord, proc: subprocess.Popen[bytes]) -> None:
        ctx, name = self._ctx, service.name
        timeout = service.start_timeout_s(ctx)
        deadline = time.monotonic() + timeout
        reason: str | None = "not probed yet"
        while time.monotonic() < deadline:
            code = process.exit_code(record, proc)
            if code is not None:
                raise StackError(
                    f"{name}: exited with code {code} while starting; last log lines:\n"
                    f"{process.tail(ctx.log_file(name), 15)}\n(full log: {ctx.log_file(name)})"
                )
            reason = service.probe(ctx)
            if reason is None:
                return
            time.sleep(0.5)
        process.stop(record, ctx.settings.stack.stop_timeout_s)
        raise StackError(f"{name}: not healthy after {timeout:.0f}s ({reason}); stopped it. See {ctx.log_file(name)}")

    def _create_topics(self) -> None:
        created = create_platform_topics(self._ctx.settings)
        if created:
            self._echo(f"{'kafka':11} created topics: {', '.join(created)}")

    def _write_env_file(self) -> None:
        s = self._ctx.settings
        lines = [
            f"METALAKE_KAFKA__BOOTSTRAP_SERVERS={s.kafka_bootstrap}",
            f"METALAKE_MONGO__URI={s.mongo_uri}",
            f"METALAKE_TRINO__HOST={s.trino.host}",
            f"METALAKE_TRINO__PORT={s.trino.port}",
            f"METALAKE_LAKE__ROOT={s.lake_root}",
            f"METALAKE_LAKE__CHECKPOINT_ROOT={s.checkpoint_root}",
            f"METALAKE_STACK__PORTS__POSTGRES={s.stack.ports.postgres}",
            f"METALAKE_ACCESS__DECISIONS__PORT={s.stack.ports.access_decisions}",
            # The SASL_SSL listener's user and CA (its password is a generated secret below): unused while
            # kafka.security_protocol is PLAINTEXT; a client switches with the protocol and the listener's address.
            f"METALAKE_KAFKA__SASL_USERNAME={scram_user(self._ctx)}",
            f"METALAKE_KAFKA__SSL_CA_LOCATION={s.local_stack_dir / 'tls' / 'ca.pem'}",
        ]
        if s.trino.https:
            # Trino's certificate is issued by the stack's CA (ops/stack/tls.py), made when Trino is prepared; a CA
            # file the environment names wins, as every variable of the environment does over this file.
            lines.append(f"METALAKE_TRINO__CA_FILE={s.local_stack_dir / 'tls' / 'ca.pem'}")
        # The stack's own paths, which no setting defaults to: a process started by hand with only this file finds
        # them too (``ops.stack.paths.stack_paths`` sets them for the processes the tooling starts).
        paths = {
            "METALAKE_SPARK__JARS_DIR": s.spark.jars_dir,
            "METALAKE_SPARK__SCRATCH_DIR": s.spark.scratch_dir,
            "METALAKE_ACCESS__RULES_FILE": s.access.rules_file,
            "METALAKE_LAKE__S3__SPARK_JARS_DIR": s.lake.s3.spark_jars_dir,
        }
        # The S3 store: the configured one, else the stack's SeaweedFS (for a lake on S3, and for tenants registered
        # with an S3 lake root).
        s3_endpoint = s.lake.s3.endpoint or f"http://{s.stack.host}:{s.stack.seaweedfs.s3}"
        lines.append(f"METALAKE_LAKE__S3__ENDPOINT={s3_endpoint}")
        # Every process's spans to the stack's Jaeger (with stack.tracing on).
        lines += trace_env(s)
        lines += [f"{variable}={value}" for variable, value in paths.items() if value is not None]
        path = s.local_stack_dir / "stack.env"
        lines += _generated_secrets(path)
        passwords = _generated_passwords(path, service_users(s))
        if passwords is not None:
            lines.append(f"{TRINO_PASSWORDS}='{json.dumps(passwords, sort_keys=True, separators=(',', ':'))}'")
        _adopt_generated(s, lines, passwords)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Owner-only: the file holds generated secrets.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write("\n".join(lines) + "\n")
        path.chmod(0o600)

    # -- down / status / logs -------------------------------------------------------------------------------------

    def down(self, names: Sequence[str] | None = None) -> None:
        if names is None:
            self._stop_tenant_jobs()
        selected = list(SERVICES)
        if names is not None:
            _check_known(names)
            # A service goes down with whatever requires it (FerretDB with PostgreSQL), not only by name.
            dependents = with_dependents(names, {s.name: s.requires for s in SERVICES})
            selected = [s for s in SERVICES if s.name in dependents]
        # Reverse order: the job before the stores it writes to.
        for service in reversed(selected):
            record = process.PidRecord.read(self._pid_file(service))
            if record is None:
                continue
            if process.stop(record, self._ctx.settings.stack.stop_timeout_s):
                self._echo(f"{service.name:11} stopped (pid {record.pid})")
            self._pid_file(service).unlink(missing_ok=True)

    def _stop_tenant_jobs(self) -> None:
        """Dedicated tenants' queries the local launcher started go first, with the whole stack: they are detached so
        they outlive a restart of the lake worker, and would otherwise outlive the stack, retrying Kafka forever."""
        s = self._ctx.settings
        launcher = LocalProcessLauncher(s, stop_timeout_s=s.stack.stop_timeout_s, stack_dir=s.local_stack_dir)
        for tenant in launcher.tenants():
            if launcher.stop(tenant):
                self._echo(f"stream of tenant {tenant} stopped")

    def status(self) -> list[ServiceStatus]:
        out = []
        for service in SERVICES:
            record = self._record(service)
            ports = service.ports(self._ctx)
            log = self._ctx.log_file(service.name)
            if record is None:
                out.append(ServiceStatus(service.name, "stopped", None, ports, "", log))
                continue
            reason = service.probe(self._ctx)
            state = "running" if reason is None else "unhealthy"
            out.append(ServiceStatus(service.name, state, record.pid, ports, reason or "healthy", log))
        return out

    def log_path(self, name: str) -> Path:
        _check_known([name])
        return self._ctx.log_file(name)


def create_platform_topics(settings: Settings) -> list[str]:
    """The platform's own topics (events, changes, outbound tests, DLQs, connector offsets), created when missing;
    returns those created. The local stack and a Compose deployment's init job (ops.compose) both run it."""
    from control.connectors.offsets import topic_config
    from metalake.kafka.admin import ensure_topic_config, ensure_topics

    topics = [
        *event_topics(),
        CHANGES_TOPIC,
        OUTBOUND_TESTS_TOPIC,
        *(dlq_topic(s) for s in ("connectors", "outbound")),
    ]
    created = ensure_topics(settings, topics)
    # The offsets topic's compaction bounds how long a record an erase superseded stays: set on a topic created
    # before they were declared too.
    offsets_config = topic_config(settings.connect)
    offsets = ensure_topics(settings, [CONNECT_OFFSETS_TOPIC], partitions=1, config=offsets_config)
    if not offsets:
        ensure_topic_config(settings, CONNECT_OFFSETS_TOPIC, offsets_config)
    return created + offsets


def _check_known(names: Sequence[str]) -> None:
    known = [s.name for s in SERVICES]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise StackError(f"unknown service(s) {', '.join(unknown)}; known: {', '.join(known)}")


def with_requirements(names: Iterable[str], requires: Mapping[str, Sequence[str]]) -> set[str]:
    """``names`` and, transitively, every service they require."""
    out: set[str] = set()
    pending = list(names)
    while pending:
        name = pending.pop()
        if name not in out:
            out.add(name)
            pending.extend(requires.get(name, ()))
    return out


def with_dependents(names: Iterable[str], requires: Mapping[str, Sequence[str]]) -> set[str]:
    """``names`` and, transitively, every service that requires one of them."""
    required_by: dict[str, list[str]] = {}
    for service, needs in requires.items():
        for need in needs:
            required_by.setdefault(need, []).append(service)
    return with_requirements(names, required_by)


def _generated_secrets(env_file: Path) -> list[str]:
    """The generated-secret lines of the env file: kept when already there, else generated now. A secret the
    environment sets itself is not generated (the environment wins over the file anyway)."""
    kept: dict[str, str] = {}
    if env_file.is_file():
        for line in env_file.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and key in GENERATED_SECRETS and value:
                kept[key] = value
    out = []
    for key in GENERATED_SECRETS:
        if key in kept:
            out.append(f"{key}={kept[key]}")
        elif not os.environ.get(key):
            out.append(f"{key}={secrets.token_urlsafe(32)}")
    return out


def _generated_passwords(env_file: Path, users: Sequence[str]) -> dict[str, str] | None:
    """Every service user's Trino password: kept from the env file, generated for a user without one; None when
    the environment sets them itself."""
    if os.environ.get(TRINO_PASSWORDS):
        return None
    kept: dict[str, str] = {}
    if env_file.is_file():
        for line in env_file.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and key == TRINO_PASSWORDS:
                try:
                    loaded = json.loads(value.strip("'"))
                except ValueError:
                    loaded = {}
                kept = {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}
    return {user: kept.get(user) or secrets.token_urlsafe(24) for user in users}


def _adopt_generated(settings: Settings, lines: Sequence[str], passwords: Mapping[str, str] | None) -> None:
    """The stack's own settings were read before the env file was written: take the generated values it renders
    Trino with (values the environment set win, as they do for every process)."""
    for line in lines:
        key, _, value = line.partition("=")
        if key == "METALAKE_TRINO__SHARED_SECRET" and settings.trino.shared_secret is None:
            settings.trino.shared_secret = SecretStr(value)
        if key == "METALAKE_TRINO__CA_FILE" and not os.environ.get(key):
            settings.trino.ca_file = Path(value)
        if key == "METALAKE_ACCESS__DECISIONS__KEY" and settings.access.decisions.key is None:
            settings.access.decisions.key = SecretStr(value)
    for user, password in (passwords or {}).items():
        settings.trino.passwords.setdefault(user, SecretStr(password))
