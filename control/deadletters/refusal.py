"""Why a dead letter cannot be replayed now."""

from __future__ import annotations


class Refused(Exception):
    """The letter cannot be replayed now: ``reason`` (no payload values) and the ``field`` at fault."""

    def __init__(self, reason: str, field: str, error_class: str = "Refused") -> None:
        super().__init__(reason)
        self.reason, self.field, self.error_class = reason, field, error_class
