"""The connector worker's settings (``metalake connect run``)."""

from __future__ import annotations

from control.auth.settings import AuthSettings, EnforcementSettings
from control.connectors.settings import ConnectorControlSettings


class WorkerSettings(AuthSettings, ConnectorControlSettings):
    """What the connector worker reads: ``connect``, the token checks' ``api`` (the PII tags of ``access`` with it)
    and the enforcement cache's TTL."""

    enforcement: EnforcementSettings = EnforcementSettings()
