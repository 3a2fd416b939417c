"""Trino 476 (the last release on Maven Central) with the ``lake`` catalog: Delta Lake, file metastore, local disk;
file-based access control and resource groups."""

from __future__ import annotations

import json
import os
from pathlib import Path

from metalake.java import find_java
from ops.stack.health import trino_probe
from ops.stack.lake_storage import trino_file_system, trino_file_system_env
from ops.stack.services.base import Service, StackContext
from ops.stack.services.seaweedfs import stack_s3
from tenants.access.rules import build_rules, write_rules
from tenants.resource_groups import build_resource_groups, resource_groups_properties

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


class Trino(Service):
    name = "trino"

    def ports(self, ctx: StackContext) -> list[int]:
        return [ctx.settings.stack.ports.trino]

    def fetch(self, ctx: StackContext) -> None:
        ctx.run_fetch_script("trino", self.name)
        find_java(_MIN_JAVA, env_var="METALAKE_TRINO_JAVA_HOME")

    def prepare(self, ctx: StackContext) -> None:
        etc = ctx.run_dir(self.name) / "etc"
        (etc / "catalog").mkdir(parents=True, exist_ok=True)
        data = ctx.data_dir(self.name)
        data.mkdir(parents=True, exist_ok=True)
        port = ctx.settings.stack.ports.trino
        server = ctx.cache_dir("trino") / "server"
        (etc / "config.properties").write_text(
            "\n".join(
                [
                    "coordinator=true",
                    "node-scheduler.include-coordinator=true",
                    f"http-server.http.port={port}",
                    f"discovery.uri=http://{ctx.host}:{port}",
                    "query.max-memory=1GB",
                    "query.max-memory-per-node=512MB",
                    "task.concurrency=2",
                    f"plugin.dir={server / 'plugin'}",
                    f"catalog.config-dir={etc / 'catalog'}",
                    f"access-control.config-files={etc / 'access-control.properties'}",
                    "",
                ]
            )
        )
        self._prepare_access_control(ctx, etc)
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

    def _prepare_access_control(self, ctx: StackContext, etc: Path) -> None:
        """File-based access control, reloaded every second: ``metalake access`` rewrites the rules as tenants and
        their PII tags change. A missing rules file starts as service users only (no tenant reads anything yet)."""
        settings = ctx.settings
        rules_file = settings.access_rules_file
        (etc / "access-control.properties").write_text(
            "\n".join(
                [
                    "access-control.name=file",
                    f"security.config-file={rules_file}",
                    "security.refresh-period=1s",
                    "",
                ]
            )
        )
        if not rules_file.is_file():
            services = [settings.trino.user, *settings.access.service_users]
            write_rules(rules_file, build_rules(services, [], catalog=settings.trino.catalog))

    def _prepare_resource_groups(self, ctx: StackContext, etc: Path) -> None:
        """One resource group per tenant (tenants/resource_groups.py). Trino reads ``etc/resource-groups.properties``
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
        return trino_probe(ctx.host, ctx.settings.stack.ports.trino)
