"""The admin API's background sweep: the tag documents of tenants provisioned before ``urn_keys`` existed get them
(``catalog.urn_keys``). Runs in a thread started by the app's lifespan (startup is not delayed): one sweep at once,
then one every ``api.resume_interval_s``. Idempotent; once done, one read per tenant.

Tenant (de)provisioning is not the API's work any more: it queues it (``control.provisioning.queue``) and the lake
worker runs it (``processors.lake.provisioning``), taking over the work of a worker that died. Erasures likewise
(``control.erasures``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from api.context import ApiContext
from catalog import urn_keys
from tenants.naming import CONTROL_DATABASE, names_for
from tenants.registry import TenantRegistry, TenantState

log = logging.getLogger(__name__)


@dataclass
class Resumer:
    ctx: ApiContext
    # Which tenants this sweep looks after: all of them; tests on the shared stack narrow it to their own.
    scope: Callable[[str], bool] = lambda _tenant: True

    def sweep(self) -> None:
        """Backfill the ``urn_keys`` of the tag documents of every active or suspended tenant still without them
        (``catalog.urn_keys``: an upgrade from before the field)."""
        for record in TenantRegistry(self.ctx.mongo[CONTROL_DATABASE]).list():
            if record.state in (TenantState.ACTIVE, TenantState.SUSPENDED) and self.scope(record.id):
                database = self.ctx.mongo[names_for(record.id, self.ctx.settings.lake_root).mongo_database]
                if not urn_keys.ready(database):
                    urn_keys.backfill(database)

    def run(self, stop: threading.Event) -> None:
        """Sweep at once, then every ``resume_interval_s`` until ``stop``; a failed sweep is retried at the next."""
        while not stop.is_set():
            try:
                self.sweep()
            except Exception as exc:  # noqa: BLE001 - MongoDB blinked: the next sweep tries again
                log.warning("api.resume_failed", extra={"error": type(exc).__name__})
            stop.wait(self.ctx.settings.api.resume_interval_s)


def start(ctx: ApiContext) -> Callable[[], None]:
    """Start the sweep's thread (unless ``api.resume`` is off); returns what stops it."""
    stop = threading.Event()
    if not ctx.settings.api.resume:
        return stop.set
    thread = threading.Thread(target=Resumer(ctx).run, args=(stop,), name="api-resume", daemon=True)
    thread.start()

    def stop_it() -> None:
        stop.set()
        thread.join(timeout=1.0)

    return stop_it
