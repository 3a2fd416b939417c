"""The lake worker's provisioning side in a test's process (``processors.lake.provisioning``, the real code on the
real stack), looking after the test's own tenants only: the stack's lake worker runs with provisioning off in the
integration session (tests/integration/conftest.py), since some tests leave a tenant queued on purpose. And the
client's side: poll ``GET /v1/tenants/{tenant}`` until the queued work is over, as docs/tenants.md tells clients to."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from fastapi.testclient import TestClient

from control.provisioning.provisioner import Provisioner
from ops.settings import Settings
from processors.lake.provisioning import ProvisioningWorker
from tests._support.itest import wait_for


@contextmanager
def provisioning_worker(
    settings: Settings,
    mongo: Any,
    scope: Callable[[str], bool],
    make_provisioner: Callable[[ProvisioningWorker], Provisioner] | None = None,
    **tuning: Any,
) -> Iterator[ProvisioningWorker]:
    """A worker polling every 0.2 s (unless ``tuning`` says otherwise) in a thread for the block; stopped after it."""
    section = settings.provisioning.model_copy(update={"poll_s": 0.2, **tuning})
    tuned = settings.model_copy(update={"provisioning": section})
    worker = ProvisioningWorker(tuned, mongo, make_provisioner, scope=scope)
    thread = threading.Thread(target=worker.run, name="it-provisioning", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop.set()
        thread.join(timeout=60)


def settled(
    api: TestClient, tenant: str, headers: dict[str, str] | None = None, timeout_s: float = 600.0
) -> dict[str, Any] | None:
    """The tenant's view once its queued work is over (done, or stopped with an error); ``None`` once it is gone."""

    def probe() -> dict[str, Any] | bool | None:
        response = api.get(f"/v1/tenants/{tenant}", headers=headers)
        if response.status_code == 404:
            return {"gone": True}
        body: dict[str, Any] = response.json()
        return body if body["queued_at"] is None or body["error"] is not None else None

    view = wait_for(f"tenant {tenant}'s queued work to be over", probe, timeout_s=timeout_s, interval_s=0.2)
    return None if view.get("gone") else view  # type: ignore[union-attr]
