"""The propagation processor's section (``METALAKE_PROPAGATION__*``) and its process's settings."""

from __future__ import annotations

from pydantic import Field

from catalog.propagation.settings import PropagationLimits
from metalake.settings import KernelSettings
from processors.settings import FaultSettings


class PropagationSettings(PropagationLimits):
    """Tag propagation along lineage (``metalake propagation run``; docs/propagation.md): its consumer group on
    ``metalake.changes`` besides the guardrails of every closure."""

    group_id: str = "metalake-propagation"
    batch_size: int = Field(default=500, gt=0)
    poll_timeout_s: float = Field(default=1.0, gt=0)


class PropagationProcessSettings(KernelSettings):
    """What ``metalake propagation run`` reads."""

    propagation: PropagationSettings = PropagationSettings()
    faults: FaultSettings = FaultSettings()
