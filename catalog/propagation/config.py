"""The guardrails of a closure, from settings (``METALAKE_PROPAGATION__*``)."""

from __future__ import annotations

from catalog.propagation.graph import Limits
from catalog.propagation.settings import PropagationLimits


def limits_from(p: PropagationLimits, max_depth: int | None = None) -> Limits:
    """The configured limits; ``max_depth`` (a dry-run's own) replaces the configured depth."""
    return Limits(
        max_depth=max_depth or p.max_depth,
        max_fanout=p.max_fanout,
        max_reached=p.max_reached,
        time_budget_s=p.time_budget_s,
    )
