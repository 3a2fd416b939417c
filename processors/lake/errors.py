"""The errors a lake command reports to its operator as one readable line (exit code 2), not as a traceback."""

from __future__ import annotations

from metalake.console import REFUSED


class LakeUsageError(Exception):
    """The request cannot be carried out as given: unknown tenant, invalid URN, unsafe retention."""


EXIT_USAGE = REFUSED
