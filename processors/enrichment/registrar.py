"""Makes each tenant the lake query writes readable in Trino, off the batch's thread.

Provisioning registers a tenant through the API; the job does it too for tenants it meets first (events may arrive
for a tenant provisioned by another replica, or before its provisioning finished), once per tenant and process. A
pooled tenant needs only views over the shared tables (registered at start); a dedicated tenant's tables are
registered by location. Trino being down must not stop ingestion: a failed registration is retried on the tenant's
next batch.
"""

from __future__ import annotations

import logging
import queue
import threading

from processors.enrichment.settings import StreamSettings
from tenants.lake_catalog import pooled_columns, register_pooled_tables, register_tenant
from tenants.naming import POOLED_TABLES, TenantNames, names_for

log = logging.getLogger(__name__)

_STOP = ""


class TrinoRegistrar:
    """``saw(tenants)`` queues tenants not registered by this process yet; a daemon thread registers them."""

    def __init__(self, settings: StreamSettings, dedicated: TenantNames | None = None) -> None:
        self._settings = settings
        self._dedicated = dedicated
        self._done: set[str] = set()
        self._queued: set[str] = set()
        self._lock = threading.Lock()
        self._queue: queue.Queue[str] = queue.Queue()
        self._replace = False
        self._columns: dict[str, list[str]] | None = None
        self._thread = threading.Thread(target=self._run, name="trino-registrar", daemon=True)

    def start(self, *, columns_changed: bool) -> None:
        """Begin registering. ``columns_changed``: the job added columns to the tables at start, so each tenant's
        views are made again (once per tenant and process) to show them."""
        self._replace = columns_changed
        self._thread.start()

    def saw(self, tenants: set[str]) -> None:
        with self._lock:
            new = tenants - self._done - self._queued
            self._queued |= new
        for tenant in sorted(new):
            self._queue.put(tenant)

    def close(self) -> None:
        self._queue.put(_STOP)
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        if self._dedicated is None:
            # At once, not at the first tenant: provisioning makes a pooled tenant's views over these tables.
            try:
                self._pooled_columns()
            except Exception as exc:  # noqa: BLE001 - retried with the first tenant
                log.warning("enrichment.trino_register_failed", extra={"error": f"{type(exc).__name__}: {exc}"})
        while (tenant := self._queue.get()) != _STOP:
            try:
                registered = self._register(tenant)
            except Exception as exc:  # noqa: BLE001 - Trino down: the tenant's next batch queues it again
                log.warning(
                    "enrichment.trino_register_failed",
                    extra={"tenant": tenant, "error": f"{type(exc).__name__}: {exc}"},
                )
                self._columns = None
                with self._lock:
                    self._queued.discard(tenant)
                continue
            with self._lock:
                self._queued.discard(tenant)
                self._done.add(tenant)
            if registered:
                log.info("enrichment.trino_registered", extra={"tenant": tenant, "tables": registered})

    def _register(self, tenant: str) -> list[str]:
        if self._dedicated is not None:
            return register_tenant(self._settings, self._dedicated, POOLED_TABLES)
        names = names_for(tenant, self._settings.lake_root)
        return register_tenant(self._settings, names, POOLED_TABLES, self._pooled_columns(), replace=self._replace)

    def _pooled_columns(self) -> dict[str, list[str]]:
        if self._columns is None:
            register_pooled_tables(self._settings)
            self._columns = pooled_columns(self._settings)
        return self._columns
