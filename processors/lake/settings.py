"""The lake commands' and the lake worker's settings (``metalake lake ...``)."""

from __future__ import annotations

from control.connectors.settings import ConnectorControlSettings
from control.settings import ErasureSettings
from processors.enrichment.settings import StreamSettings


class LakeWorkerSettings(StreamSettings, ConnectorControlSettings):
    """What the lake commands (Spark drivers on the streaming job's tables) and the erasure worker read; an erase
    rewrites the connectors' offsets too (``connect``)."""

    erasure: ErasureSettings = ErasureSettings()
