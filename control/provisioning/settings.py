"""The provisioning queue's section (``METALAKE_PROVISIONING__*``): filled by the admin API, drained by the lake
worker, which runs every step of a tenant's provisioning and deprovisioning."""

from __future__ import annotations

from pydantic import BaseModel, Field

from control.connectors.settings import ConnectorControlSettings
from tenants.access.settings import AccessRulesSettings


class ProvisioningSettings(BaseModel):
    """Tenant (de)provisioning run by the lake worker (``metalake lake worker``).

    The worker looks for queued tenants every ``poll_s`` and runs at most ``concurrency`` at a time, each under the
    lease ``tenant:<id>`` of ``lease_ttl_s`` (renewed while it runs): a crashed worker's tenant is claimed again once
    it expires. A step's subprocess (``lake init``, ``lake drop``: a Spark driver) is killed after ``step_timeout_s``
    (the run fails with the step named). A step waiting on another component (the shared tables the streaming job
    registers) is retried every ``waiting_retry_s``. ``job_launcher`` names the registered launcher (the
    ``metalake.launchers`` entry points) that runs dedicated tenants' streaming queries. ``enabled`` off: this worker
    runs erasures only (the integration tests run their own, scoped to their tenants).
    """

    enabled: bool = True
    concurrency: int = Field(default=2, gt=0, le=16)
    poll_s: float = Field(default=1.0, gt=0)
    lease_ttl_s: float = Field(default=60.0, gt=0)
    step_timeout_s: float = Field(default=900.0, gt=0)
    waiting_retry_s: float = Field(default=30.0, ge=0)
    job_launcher: str = "local"


class ProvisioningWorkerSettings(AccessRulesSettings, ConnectorControlSettings):
    """What the provisioning steps read: the kernel's (Kafka, lake, Trino, MongoDB), the Trino access rules, the
    connectors' offsets topic, and ``provisioning``."""

    provisioning: ProvisioningSettings = ProvisioningSettings()
