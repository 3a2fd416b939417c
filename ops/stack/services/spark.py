"""A Spark standalone cluster (a master and one worker) run from the pyspark distribution itself (its
``bin/spark-class``), started only on request: ``metalake stack up spark-worker``. The streaming job and the lake
commands use it with ``METALAKE_SPARK__MASTER=spark://<host>:<spark_master port>``.

RPC between driver, master, worker and executors is authenticated and encrypted (``spark.authenticate`` and
``spark.network.crypto.enabled``, with the stack's generated secret handed over in a properties file only the
stack's user can read). The master's and worker's web UIs are read-only status pages (kill links off) bound to the
stack's host.
"""

from __future__ import annotations

import importlib.util
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from metalake.java import find_java
from ops.stack.services.base import Service, ServiceError, StackContext

MASTER = "spark-master"
SECRET_VARIABLE = "METALAKE_SPARK__AUTH_SECRET"  # noqa: S105 - the variable's name, not its value
WORKER = "spark-worker"


def spark_home() -> Path:
    """The pyspark distribution: it ships ``bin/spark-class`` and every jar a master and a worker need. Found, not
    imported: the ``metalake`` command loads no deployable's heavy dependencies to list its services."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ServiceError("pyspark is not installed here: install metalake[spark] to run a Spark cluster")
    return Path(spec.origin).parent


def master_url(ctx: StackContext) -> str:
    return f"spark://{ctx.host}:{ctx.settings.stack.ports.spark_master}"


def master_status(ctx: StackContext) -> dict[str, Any] | None:
    """The master's own status document (its web UI's ``/json/``), or None while it does not answer."""
    url = f"http://{ctx.host}:{ctx.settings.stack.ports.spark_master_ui}/json/"
    try:
        with urllib.request.urlopen(url, timeout=3) as resp:
            status = json.load(resp)
    except (OSError, urllib.error.URLError, ValueError):
        return None
    return status if isinstance(status, dict) else None


class _SparkDaemon(Service):
    def started_by_default(self, ctx: StackContext) -> bool:
        """Only when named: a job runs on the cluster only when its master setting says so."""
        return False

    main_class = ""

    def fetch(self, ctx: StackContext) -> None:
        """Nothing to download: the daemons are in the pyspark distribution the venv holds."""
        if not (spark_home() / "bin" / "spark-class").is_file():
            raise ServiceError(f"{self.name}: {spark_home()}/bin/spark-class is missing (pyspark installed without it)")
        find_java(17, 21, env_var="METALAKE_SPARK_JAVA_HOME")

    def properties(self, ctx: StackContext) -> Path:
        return ctx.run_dir(self.name) / "spark.properties"

    def prepare(self, ctx: StackContext) -> None:
        secret = ctx.generated_secret(SECRET_VARIABLE)
        if secret is None:
            raise ServiceError(f"{self.name}: {SECRET_VARIABLE} is unset (the stack generates it in stack.env)")
        lines = [
            "spark.authenticate true",
            f"spark.authenticate.secret {secret}",
            "spark.network.crypto.enabled true",
            "spark.ui.killEnabled false",
            "spark.master.rest.enabled false",
            "spark.worker.cleanup.enabled true",
        ]
        path = self.properties(ctx)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Owner-only: the file holds the cluster's secret.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write("\n".join(lines) + "\n")
        path.chmod(0o600)

    def env(self, ctx: StackContext) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        java = find_java(17, 21, env_var="METALAKE_SPARK_JAVA_HOME")
        env.update(
            {
                "JAVA_HOME": str(java.parent.parent),
                "SPARK_HOME": str(spark_home()),
                # The web UI binds where SPARK_LOCAL_IP says (else every interface).
                "SPARK_LOCAL_IP": ctx.host,
                "SPARK_LOG_DIR": str(ctx.run_dir(self.name)),
                "SPARK_NO_DAEMONIZE": "1",
            }
        )
        return env

    def command(self, ctx: StackContext, *args: str) -> list[str]:
        return [
            str(spark_home() / "bin" / "spark-class"),
            self.main_class,
            "--host",
            ctx.host,
            "--properties-file",
            str(self.properties(ctx)),
            *args,
        ]


class SparkMaster(_SparkDaemon):
    name = MASTER
    main_class = "org.apache.spark.deploy.master.Master"

    def ports(self, ctx: StackContext) -> list[int]:
        ports = ctx.settings.stack.ports
        return [ports.spark_master, ports.spark_master_ui]

    def argv(self, ctx: StackContext) -> list[str]:
        ports = ctx.settings.stack.ports
        return self.command(ctx, "--port", str(ports.spark_master), "--webui-port", str(ports.spark_master_ui))

    def probe(self, ctx: StackContext) -> str | None:
        status = master_status(ctx)
        if status is None:
            return "master's status page not answering yet"
        return None if status.get("status") == "ALIVE" else f"master is {status.get('status')}"


class SparkWorker(_SparkDaemon):
    name = WORKER
    main_class = "org.apache.spark.deploy.worker.Worker"
    requires = (MASTER,)

    def ports(self, ctx: StackContext) -> list[int]:
        ports = ctx.settings.stack.ports
        return [ports.spark_worker, ports.spark_worker_ui]

    def work_dir(self, ctx: StackContext) -> Path:
        return ctx.data_dir(self.name)

    def prepare(self, ctx: StackContext) -> None:
        super().prepare(ctx)
        self.work_dir(ctx).mkdir(parents=True, exist_ok=True)

    def argv(self, ctx: StackContext) -> list[str]:
        stack = ctx.settings.stack
        return self.command(
            ctx,
            "--port",
            str(stack.ports.spark_worker),
            "--webui-port",
            str(stack.ports.spark_worker_ui),
            "--cores",
            str(stack.spark_worker_cores),
            "--memory",
            stack.spark_worker_memory,
            "--work-dir",
            str(self.work_dir(ctx)),
            master_url(ctx),
        )

    def probe(self, ctx: StackContext) -> str | None:
        status = master_status(ctx)
        if status is None:
            return "master's status page not answering"
        port = ctx.settings.stack.ports.spark_worker
        alive = [w for w in status.get("workers", []) if w.get("port") == port and w.get("state") == "ALIVE"]
        return None if alive else "worker not registered with the master yet"
