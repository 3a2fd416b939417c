"""Every process's settings in one root, with the local stack's section (``ops.stack.settings``): the operator
tooling's, which starts and checks them all, and the tests'.

Addresses left unset are derived from the local stack's host and ports (loopback: for development); the stack writes
them into its env file, so the processes it starts (whose roots have no such defaults) read the same ones.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import model_validator

from api.settings import AdminApiSettings
from connectors.settings import WorkerSettings
from control.auth.settings import ApiSettings
from metalake.settings import load_settings, required
from ops.stack.settings import StackSettings
from processors.access.settings import AccessProcessSettings
from processors.lake.settings import LakeWorkerSettings
from processors.outbound.settings import OutboundProcessSettings
from processors.propagation.settings import PropagationProcessSettings, PropagationSettings


class Settings(
    AdminApiSettings,
    WorkerSettings,
    LakeWorkerSettings,
    PropagationProcessSettings,
    OutboundProcessSettings,
    AccessProcessSettings,
):
    """All sections, and the local stack's (``stack``)."""

    stack: StackSettings = StackSettings()
    # A section two roots declare differently (the kernel's key alone and the API's whole section; the dry run's
    # guardrails and the processor's) is the wider one here.
    api: ApiSettings = ApiSettings()
    propagation: PropagationSettings = PropagationSettings()

    @model_validator(mode="after")
    def _derive_addresses(self) -> Settings:
        host, ports = self.stack.host, self.stack.ports
        self.kafka.bootstrap_servers = self.kafka.bootstrap_servers or f"{host}:{ports.kafka}"
        self.mongo.uri = self.mongo.uri or f"mongodb://{host}:{ports.ferretdb}/"
        self.trino.host = self.trino.host or host
        self.trino.port = self.trino.port or ports.trino
        return self

    @property
    def local_stack_dir(self) -> Path:
        """The local stack's folder, for what only exists there (the local launcher's run and log folders)."""
        return required(self.stack.dir, "stack.dir")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The operator tooling's settings, read once."""
    return load_settings(Settings)
