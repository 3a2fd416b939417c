"""The outbound runtime's settings (``metalake outbound run``)."""

from __future__ import annotations

from control.subscriptions.settings import OutboundSettings
from metalake.settings import KernelSettings


class OutboundProcessSettings(KernelSettings):
    """What the outbound runtime and its destinations read."""

    outbound: OutboundSettings = OutboundSettings()
