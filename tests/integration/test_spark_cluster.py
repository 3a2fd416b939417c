"""The streaming job on a Spark standalone cluster: a master and a worker started from the pyspark distribution by
the stack (``metalake stack up spark-worker``), RPC authenticated with the stack's secret, the job's executors in the
worker's own JVM running the metalake code the driver ships them (``spark.submit.pyFiles``). The effectively-once
fault test passes there: killed after its first Delta commit and restarted, the job loses and doubles nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from metalake.kafka import ensure_topics
from ops.settings import Settings
from ops.stack.manager import StackManager
from ops.stack.services.base import StackContext
from ops.stack.services.spark import SparkWorker, master_status, master_url
from tenants.naming import names_for
from tests._support.streamjob import kill_after_delta_commit_then_restart

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(stack: StackManager, settings: Settings) -> Iterator[StackContext]:
    running_before = {s.name for s in stack.status() if s.state == "running"}
    stack.up(["spark-worker"])
    yield StackContext(settings, Path.cwd())
    stack.down([name for name in ("spark-worker", "spark-master") if name not in running_before])


def test_the_job_on_a_standalone_cluster_is_effectively_once_across_a_kill(
    settings: Settings,
    cluster: StackContext,
    tenant: str,
    mongo: MongoClient[dict[str, Any]],
    trino_cursor: Any,
    tmp_path: Path,
) -> None:
    names = names_for(tenant, settings.lake_root, dedicated=True)
    ensure_topics(settings, [names.priority_topic, names.bulk_topic])
    on_cluster = {
        "METALAKE_SPARK__MASTER": master_url(cluster),
        "METALAKE_SPARK__EXECUTOR_MEMORY": "1g",
        "METALAKE_SPARK__CORES_MAX": "2",
    }
    kill_after_delta_commit_then_restart(settings, names, mongo, trino_cursor, tmp_path, env=on_cluster)

    # Both runs were applications of the cluster (the master lists them), not local masters.
    status = master_status(cluster) or {}
    apps = [a for a in (*status.get("activeapps", []), *status.get("completedapps", [])) if tenant in a["name"]]
    assert len(apps) == 2, status
    # Their executors ran in the worker, on the code the driver shipped (a zip named by its contents' hash).
    work = SparkWorker().work_dir(cluster)
    shipped = {p.name for app in apps for p in (work / app["id"]).rglob("metalake-code-*.zip")}
    assert len(shipped) == 1, sorted(p.name for p in work.rglob("*"))[:50]
