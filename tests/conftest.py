"""The tests of a checkout use its local stack: settings (here and in every process a test starts) read its .stack/.

Deployables discover nothing on disk; like the ``metalake`` command, the test session points the environment at the
checkout's stack before any settings are read; under ``make test``'s two workers, the second one at its lane's
stack (tests/_support/lanes.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from ops.stack.paths import use_checkout_stack
from tests._support.lanes import use_lane

use_lane(Path(__file__).resolve().parents[1])
use_checkout_stack(Path(__file__).resolve().parent)
# The projection queries poll Kafka every trigger even with nothing to read: at the product's 100 ms an idle job and
# its broker take about 14 % of a core (docs/benchmarks.md, "`make test`"), and the session runs a pooled job per lane
# and a job per fault test for its whole length on two cores. 1 s took the idle job and broker from 10.3 to 5.8
# CPU-seconds a minute against 250 ms (2026-11-30, this file's previous value), and adds at most 1 s before a change
# reaches MongoDB, inside every wait of these tests (itest.wait_for backs off to 2 s); an operator's own setting wins.
os.environ.setdefault("METALAKE_SPARK__PROJECTION_TRIGGER_INTERVAL", "1 second")
