"""The tests of a checkout use its local stack: settings (here and in every process a test starts) read its .stack/.

Deployables discover nothing on disk; like the ``metalake`` command, the test session points the environment at the
checkout's stack before any settings are read; under ``make test``'s two workers, the second one at its lane's
stack (tests/_support/lanes.py).
"""

from __future__ import annotations

from pathlib import Path

from ops.stack.paths import use_checkout_stack
from tests._support.lanes import use_lane

use_lane(Path(__file__).resolve().parents[1])
use_checkout_stack(Path(__file__).resolve().parent)
