"""The provisioning steps of a tenant. Each one is idempotent both ways: ``provision`` makes its resource exist (a
second run finds it and does nothing), ``deprovision`` removes it and everything it holds (a second run finds nothing).

The lake worker runs them (``processors.lake.provisioning``, from the queue the admin API fills); the API runs none. The
worker never loads Spark in its own process. A pooled tenant is provisioned in seconds without it: its data lives in the
shared pooled tables (created by the streaming job), so its Trino schema only gets views over them
(``tenants.lake_catalog``) and its own ``audit`` table, created with delta-rs. A dedicated tenant's own Delta tables are
created by ``python -m processors.lake init --dedicated`` in a subprocess (a JVM), which also registers them in Trino.
The Trino access rules are rendered in-process (``tenants.access.sync``, which needs no Spark either). Deleting a
tenant's rows of the shared tables does need Spark: deprovisioning runs ``python -m processors.lake drop`` in a
subprocess. Every physical name comes from ``tenants.naming``.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from pymongo import MongoClient

from catalog import urn_keys
from catalog.indexes import INDEXES
from control import audit as auditlog
from control.connectors.offsets import OffsetStore, OffsetsUnavailable
from control.provisioning.launcher import JobLauncher
from control.provisioning.settings import ProvisioningWorkerSettings
from metalake.kafka import PublishError
from metalake.kafka.admin import ensure_topics
from metalake.kafka.config import client_config
from metalake.lake_uri import S3Path
from metalake.mongo import Doc
from metalake.s3 import lake_s3_client, lake_storage_options
from metalake.trino_admin import admin_cursor
from tenants.access.sync import AccessSync
from tenants.lake_catalog import drop_schema, register_tables, register_tenant
from tenants.naming import CONTROL_DATABASE, TenantNames
from tenants.registry import TENANTS_COLLECTION, TenantRecord
from tenants.trino_schemas import UNKEYED, trino_schema

log = logging.getLogger(__name__)

# (argv) -> (exit code, combined output tail); a seam for tests of the failure paths.
Runner = Callable[[Sequence[str]], tuple[int, str]]


class StepFailed(Exception):
    """A step could not complete; the message is safe to show (no secrets, no payloads)."""


class StepInterrupted(Exception):
    """The worker running the step is stopping (its subprocess was killed): nothing is recorded on the tenant, whose
    lease goes with the worker, and the next worker to claim it runs the step again."""


class StepWaiting(StepFailed):
    """A step waits on something another component makes (the shared tables, registered by the streaming job when
    it starts): the run stops like a failure, but the lake worker retries it by itself."""


def run_subprocess(argv: Sequence[str], timeout_s: float = 600.0) -> tuple[int, str]:
    done = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout_s, check=False, stdin=subprocess.DEVNULL
    )
    return done.returncode, (done.stderr or "")[-2000:]


@dataclass(frozen=True)
class StepContext:
    settings: ProvisioningWorkerSettings
    mongo: MongoClient[Doc]
    launcher: JobLauncher
    run: Runner = run_subprocess


class Step(Protocol):
    """One provisioning step. ``applies`` tells whether the tenant needs it (some are for dedicated tenants only)."""

    name: str

    def applies(self, tenant: TenantRecord) -> bool: ...

    def provision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None: ...

    def deprovision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None: ...


def _dedicated(tenant: TenantRecord) -> bool:
    return tenant.dedicated


class TopicsStep:
    """A dedicated tenant's event topics (pooled tenants share the platform's)."""

    name = "topics"

    def applies(self, tenant: TenantRecord) -> bool:
        return _dedicated(tenant)

    def provision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        ensure_topics(ctx.settings, [names.priority_topic, names.bulk_topic])

    def deprovision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        admin = AdminClient(client_config(ctx.settings))
        wanted = [names.priority_topic, names.bulk_topic]
        existing = set(admin.list_topics(timeout=30).topics)
        doomed = [t for t in wanted if t in existing]
        if not doomed:
            return
        for topic, future in admin.delete_topics(doomed, operation_timeout=30).items():
            try:
                future.result(timeout=30)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise StepFailed(f"deleting topic {topic} failed: {exc.args[0].name()}") from None


def _last_line(tail: str) -> str:
    return (tail.strip().splitlines()[-1:] or ["(no output)"])[0][:300]


class LakeStep:
    """Where the tenant's data lives, readable in Trino. Pooled: views over the shared tables in its schema and its
    own ``audit`` table (delta-rs), no Spark. Dedicated: its own Delta tables, created and registered by the lake
    CLI in a subprocess. Deprovisioning runs ``python -m processors.lake drop`` (Spark): the tenant's rows of the
    shared tables and its lake folder (a pooled tenant's holds its ``audit`` only; on S3 every object under its
    prefix, which is checked gone afterwards); then its streaming checkpoints go.
    Its Trino schema goes in ``TrinoStep``, which runs before."""

    name = "lake"

    def applies(self, tenant: TenantRecord) -> bool:
        return True

    def provision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        if names.dedicated:
            self._init_dedicated(ctx, names)
        else:
            self._views_and_audit(ctx, names)

    def _init_dedicated(self, ctx: StepContext, names: TenantNames) -> None:
        argv = [sys.executable, "-m", "processors.lake", "init", "--tenant", names.tenant_id, "--dedicated"]
        code, tail = ctx.run(argv)
        if code != 0:
            raise StepFailed(f"lake init exited with {code}: {_last_line(tail)}")

    def _views_and_audit(self, ctx: StepContext, names: TenantNames) -> None:
        try:
            register_tenant(ctx.settings, names)
        except LookupError as exc:
            raise StepWaiting(f"{exc} (the streaming job registers them when it starts)") from None
        auditlog.ensure_table(names.delta_path("audit"), lake_storage_options(ctx.settings))
        register_tables(ctx.settings, names, ("audit",))

    def deprovision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        # Deleting rows of the shared tables needs Spark (DELETE, then VACUUM of the files removed): slow, but
        # deprovisioning may be; the lake CLI also deletes the tenant's folder, and is idempotent.
        # Deprovisioning is the confirmation (--yes): the tenant was deleted through the API.
        code, tail = ctx.run([sys.executable, "-m", "processors.lake", "drop", "--yes", "--tenant", names.tenant_id])
        if code != 0:
            raise StepFailed(f"lake drop exited with {code}: {_last_line(tail)}")
        shutil.rmtree(ctx.settings.checkpoint_root / names.tenant_id, ignore_errors=True)
        if isinstance(names.lake_dir, Path) and names.lake_dir.exists():
            raise StepFailed(f"the lake folder {names.lake_dir} is still there after lake drop")
        client = lake_s3_client(ctx.settings)
        if isinstance(names.lake_dir, S3Path) and client is not None:
            if client.has_objects(names.lake_dir.bucket, names.lake_dir.folder):
                raise StepFailed(f"the lake folder {names.lake_dir} still holds objects after lake drop")


class TrinoStep:
    """The tenant's Trino schema. Created by ``LakeStep``; this step checks it is there (so a tenant is never active
    without it) and drops it, views and tables first, when the tenant goes. Dropping a view or unregistering a table
    leaves the data alone: the shared tables stay, and the tenant's own folder goes in ``LakeStep``."""

    name = "trino"

    def applies(self, tenant: TenantRecord) -> bool:
        return True

    def provision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        schema = trino_schema(ctx.settings, names.tenant_id)
        with admin_cursor(ctx.settings) as cur:
            cur.execute(
                f"SELECT count(*) FROM {ctx.settings.trino.catalog}.information_schema.tables "  # noqa: S608 - operator config
                "WHERE table_schema = ? AND table_name = 'audit'",
                [schema],
            )
            if cur.fetchall()[0][0] != 1:
                raise StepFailed(f"Trino has no table {schema}.audit after the lake step")

    def deprovision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        # The schema named after the id alone too: a deployment whose schemas were not moved yet
        # (tenants.schema_migration) still has it.
        for schema in dict.fromkeys([trino_schema(ctx.settings, names.tenant_id), UNKEYED.schema(names.tenant_id)]):
            drop_schema(ctx.settings, schema)


class MongoStep:
    """The tenant's MongoDB database: the projection's collections and the API's indexes
    (``catalog.indexes.INDEXES``)."""

    name = "mongo"

    def applies(self, tenant: TenantRecord) -> bool:
        return True

    def provision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        # The indexes the API's reads use (the job itself reads by _id); creating one creates its collection. Only the
        # missing ones, one at a time: FerretDB closes the connection on a multi-index createIndexes whose indexes
        # all exist already, so a repeated run would fail.
        db = ctx.mongo[names.mongo_database]
        for collection, models in INDEXES.items():
            existing = set(db[collection].index_information())
            for model in models:
                if model.document["name"] not in existing:
                    db[collection].create_indexes([model])
        # A new tenant's tags are written with their urn_keys: this only records it (one done before the field
        # existed, re-provisioned, gets its documents backfilled).
        urn_keys.backfill(db)

    def deprovision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        ctx.mongo.drop_database(names.mongo_database)


class StreamStep:
    """A dedicated tenant's own streaming query (pooled tenants are served by the pooled job)."""

    name = "stream"

    def applies(self, tenant: TenantRecord) -> bool:
        return _dedicated(tenant)

    def provision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        ctx.launcher.ensure_running(names.tenant_id)

    def deprovision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        ctx.launcher.stop(names.tenant_id)


class AccessStep:
    """The Trino access rules: rendered from the control plane (``tenants.access.sync``, the code of ``metalake
    access sync``), so the tenant's users reach its schema (and, once the tenant is gone or suspended, nothing). Run
    in-process: a Python subprocess would cost its imports, about as long as the rest of a pooled provisioning."""

    name = "access"

    def applies(self, tenant: TenantRecord) -> bool:
        return True

    def provision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        AccessSync(ctx.settings, ctx.mongo).sync([names.tenant_id])

    def deprovision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        # The file is rendered from every tenant's stored state, and a tenant in state ``deleting`` gets no rules.
        AccessSync(ctx.settings, ctx.mongo).sync([names.tenant_id])


class ControlPlaneStep:
    """The tenant's documents in the control plane (connectors and their secrets and tasks, OAuth clients,
    subscriptions, deliveries, erasures, access rules state...): every collection but ``tenants`` itself, matched by
    the ``tenant`` field or an ``_id`` that is the tenant id or starts with ``<tenant>/``. Nothing to provision."""

    name = "control"

    def applies(self, tenant: TenantRecord) -> bool:
        return True

    def provision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        return None

    def deprovision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        db = ctx.mongo[CONTROL_DATABASE]
        query: Doc = {
            "$or": [
                {"tenant": names.tenant_id},
                {"_id": names.tenant_id},
                {"_id": {"$regex": f"^{re.escape(names.tenant_id)}/"}},
            ]
        }
        for collection in db.list_collection_names():
            if collection != TENANTS_COLLECTION and not collection.startswith("system."):
                deleted = db[collection].delete_many(query).deleted_count
                if deleted:
                    log.info("tenants.control_deleted", extra={"collection": collection, "documents": deleted})


class OffsetsStep:
    """The tenant's connector offsets in the compacted offsets topic: a tombstone for every live key, so compaction
    removes them. The keys are read from the topic (``OffsetStore.forget_tenant``), so offsets of a connector deleted
    long ago go too. Runs before ``ControlPlaneStep`` when deprovisioning (listed after it), while the connectors are
    still documented. Nothing to provision."""

    name = "offsets"

    def applies(self, tenant: TenantRecord) -> bool:
        return True

    def provision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        return None

    def deprovision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        store = OffsetStore(ctx.settings)
        try:
            forgotten = store.forget_tenant(names.tenant_id)
        except OffsetsUnavailable:
            raise StepFailed("the connector offsets topic could not be read to its end") from None
        except PublishError:
            # Its message names partition keys (source identifiers): not for the tenant document.
            raise StepFailed("Kafka did not confirm every offset tombstone") from None
        finally:
            store.close()
        if forgotten:
            log.info("tenants.offsets_forgotten", extra={"tenant": names.tenant_id, "keys": forgotten})


# Provisioning order; deprovisioning runs the reverse (the query stops before its topics and tables go).
STEPS: tuple[Step, ...] = (
    TopicsStep(),
    LakeStep(),
    TrinoStep(),
    MongoStep(),
    ControlPlaneStep(),
    OffsetsStep(),
    StreamStep(),
    AccessStep(),
)
