"""The lake commands' and the lake worker's settings (``metalake lake ...``)."""

from __future__ import annotations

from control.provisioning.settings import ProvisioningWorkerSettings
from control.settings import ErasureSettings
from processors.enrichment.settings import StreamSettings


class LakeWorkerSettings(StreamSettings, ProvisioningWorkerSettings):
    """What the lake commands (Spark drivers on the streaming job's tables) and the lake worker read: an erase
    rewrites the connectors' offsets too (``connect``); the provisioning steps the worker runs read ``provisioning``,
    ``connect`` and ``access`` (the Trino rules they render)."""

    erasure: ErasureSettings = ErasureSettings()
