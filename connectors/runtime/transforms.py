"""The worker's single-message transforms; they live in :mod:`control.connectors.chain` since dead-letter replay
(the admin API) runs a record through a connector's current chain too. Re-exported for the worker's modules."""

from control.connectors.chain import (
    Chain,
    FilterType,
    RenameField,
    Routed,
    RouteTopicClass,
    StampTenant,
    Transform,
    TransformError,
    build,
)

__all__ = [
    "Chain",
    "FilterType",
    "RenameField",
    "RouteTopicClass",
    "Routed",
    "StampTenant",
    "Transform",
    "TransformError",
    "build",
]
