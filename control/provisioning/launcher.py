"""Where a dedicated tenant's streaming query runs: one small interface, its implementations plugins by name.

Launchers register in the ``metalake.launchers`` entry-point group and ``provisioning.job_launcher`` names the one to
use; the lake worker, which runs the provisioning steps, calls it. The local stack's is ``local``
(``ops.stack.launcher``: a detached child process on this machine); in production another would create or delete a
Kubernetes Deployment of the job image with ``--tenant T`` (one replica: Spark checkpoints allow one writer), see
docs/tenants.md.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

from control.provisioning.settings import ProvisioningWorkerSettings
from metalake.plugins import PluginRegistry

JobState = Literal["running", "starting", "stopped"]


@dataclass(frozen=True)
class JobStatus:
    tenant: str
    state: JobState
    pid: int | None = None


class JobLauncher(ABC):
    """Starts, stops and reports the streaming query of one dedicated tenant. Every method is idempotent."""

    @abstractmethod
    def __init__(self, settings: ProvisioningWorkerSettings) -> None: ...

    @abstractmethod
    def ensure_running(self, tenant: str) -> JobStatus: ...

    @abstractmethod
    def stop(self, tenant: str) -> bool: ...

    @abstractmethod
    def status(self, tenant: str) -> JobStatus: ...


GROUP = "metalake.launchers"
LAUNCHERS: PluginRegistry[type[JobLauncher]] = PluginRegistry(GROUP, (JobLauncher,))


def launcher_for(settings: ProvisioningWorkerSettings) -> JobLauncher:
    """The launcher ``provisioning.job_launcher`` names; :class:`metalake.plugins.UnknownPlugin` if none is
    registered so."""
    return LAUNCHERS.get(settings.provisioning.job_launcher)(settings)
