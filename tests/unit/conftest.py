"""Unit tests run with the first lane's view of the local stack, whichever of ``make test``'s two workers runs them
(tests/_support/lanes.py): several read settings from the environment and expect the checkout's stack and the default
ports, and the second lane's stack, started early in the background, writes its own ports to its env file meanwhile."""

from __future__ import annotations

import pytest

from tests._support.lanes import first_lane_environment


@pytest.fixture(autouse=True)
def _first_lane(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in first_lane_environment().items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
