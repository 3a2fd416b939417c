"""The guardrails of every closure (``METALAKE_PROPAGATION__*``): read by the propagation processor and by the admin
API's dry run, whose roots both carry them."""

from __future__ import annotations

from pydantic import BaseModel, Field


class PropagationLimits(BaseModel):
    """Hops, edges followed per asset, assets reached and time of one closure (docs/propagation.md)."""

    max_depth: int = Field(default=10, ge=1, le=1000)
    max_fanout: int = Field(default=1000, ge=1)
    max_reached: int = Field(default=100_000, ge=1)
    time_budget_s: float = Field(default=5.0, gt=0)
    # A dry-run loads the lineage within its reach, never the whole tenant; past this many edges it is refused (422)
    # rather than held in the API's memory.
    dry_run_max_edges: int = Field(default=50_000, ge=1)
