"""The tests of a checkout use its local stack: settings (here and in every process a test starts) read its .stack/.

Deployables discover nothing on disk; like the ``metalake`` command, the test session points the environment at the
checkout's stack before any settings are read.
"""

from __future__ import annotations

from pathlib import Path

from ops.stack.paths import use_checkout_stack

use_checkout_stack(Path(__file__).resolve().parent)
