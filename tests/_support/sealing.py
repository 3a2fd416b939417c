"""The sealer of the local stack's processes (``sealer_for`` of the stack's settings): what a test's stores seal with,
so the API and the outbound runtime it starts open what the test wrote, and the reverse."""

from __future__ import annotations

from metalake.sealing import Sealer, sealer_for
from metalake.settings import load_settings
from ops.settings import Settings


def stack_sealer() -> Sealer | None:
    return sealer_for(load_settings(Settings))
