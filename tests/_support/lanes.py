"""Two lanes for the test session: ``make test`` runs pytest-xdist with two workers, each on a local stack of its own.

The integration tests wait on services a good part of their time (a broker's restart, a Spark driver's start, a
trigger, an outage held on purpose): one lane left a third of the two cores idle. Each lane has its own stack so a
test that kills a process, stops Kafka or FerretDB, or counts what a shared processor did sees only its own lane.
Worker ``gw0`` (and a session without xdist) uses the checkout's stack as it is; ``gw1`` moves every port of the
stack to the 23xxx block below and its folder to ``<stack>/lanes/gw1``, whose ``cache`` is the checkout's (one
download and build of each service for both lanes). Files stay whole on one worker (``--dist loadfile``): module
fixtures and a suite's own port block are never split.

The second lane's environment is set before anything is collected (tests/conftest.py), so settings a test module reads
at import name its lane's stack. The unit tests, which expect the checkout's stack and the default ports whichever
worker runs them, get the first lane's view back while they run (``first_lane_environment``, tests/unit/conftest.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from ops.stack.paths import stack_paths

WORKER = "PYTEST_XDIST_WORKER"

# The second lane's ports: the stack's (ops.stack.settings.StackPorts, SeaweedFSPorts), the processes' it starts and
# the OPA suite's. Below the ephemeral range (32768+) and clear of the suites' own blocks (18480, 21100, 28100).
SECOND_LANE_PORTS: dict[str, int] = {
    "METALAKE_STACK__PORTS__KAFKA": 23092,
    "METALAKE_STACK__PORTS__KAFKA_CONTROLLER": 23093,
    "METALAKE_STACK__PORTS__KAFKA_SASL_SSL": 23094,
    "METALAKE_STACK__PORTS__FERRETDB": 23017,
    "METALAKE_STACK__PORTS__TRINO": 23080,
    "METALAKE_STACK__PORTS__POSTGRES": 23432,
    "METALAKE_STACK__PORTS__SPARK_MASTER": 23077,
    "METALAKE_STACK__PORTS__SPARK_MASTER_UI": 23190,
    "METALAKE_STACK__PORTS__SPARK_WORKER": 23078,
    "METALAKE_STACK__PORTS__SPARK_WORKER_UI": 23191,
    "METALAKE_STACK__PORTS__PROMETHEUS": 23090,
    "METALAKE_STACK__PORTS__ENRICHMENT_HEALTH": 23101,
    "METALAKE_STACK__PORTS__PROPAGATION_HEALTH": 23102,
    "METALAKE_STACK__PORTS__OUTBOUND_HEALTH": 23103,
    "METALAKE_STACK__PORTS__ACCESS_HEALTH": 23104,
    "METALAKE_STACK__PORTS__LAKE_WORKER_HEALTH": 23105,
    "METALAKE_STACK__PORTS__ACCESS_DECISIONS": 23106,
    "METALAKE_STACK__PORTS__JAEGER_OTLP": 23318,
    "METALAKE_STACK__PORTS__JAEGER_QUERY": 23686,
    "METALAKE_STACK__PORTS__JAEGER_QUERY_GRPC": 23685,
    "METALAKE_STACK__SEAWEEDFS__S3": 23333,
    "METALAKE_STACK__SEAWEEDFS__MASTER": 23334,
    "METALAKE_STACK__SEAWEEDFS__VOLUME": 23381,
    "METALAKE_STACK__SEAWEEDFS__FILER": 23888,
    "METALAKE_STACK__SEAWEEDFS__GRPC_OFFSET": 50,
    "METALAKE_API__PORT": 23000,
    "METALAKE_CONNECT__PORT": 23083,
}


def use_lane(root: Path) -> None:
    """Point this worker at its lane's stack, its folder and its ports; call before any settings are read
    (tests/conftest.py)."""
    worker = os.environ.get(WORKER, "gw0")
    if worker == "gw0":
        return
    if worker != "gw1":
        raise RuntimeError(f"tests run in two lanes at most (pytest -n 2), not as worker {worker}")
    base = Path(os.environ.get("METALAKE_STACK__DIR") or root / ".stack")
    lane = base / "lanes" / worker
    lane.mkdir(parents=True, exist_ok=True)
    (base / "cache").mkdir(exist_ok=True)
    if not (lane / "cache").exists():
        (lane / "cache").symlink_to(base / "cache", target_is_directory=True)
    os.environ["METALAKE_STACK__DIR"] = str(lane)
    # The checkout's env file names the first lane's addresses; the lane's own is written by its stack's first `up`.
    os.environ["METALAKE_ENV_FILE"] = str(lane / "stack.env")
    # The lake, the checkpoints and the stack's other paths too: the worker inherits the xdist controller's
    # environment, in which tests/conftest.py already named the first lane's (two stream jobs on one checkpoint
    # folder, each reading its own Kafka, failed on each other's offsets).
    os.environ.update(stack_paths(lane))
    os.environ.update({name: str(port) for name, port in SECOND_LANE_PORTS.items()})


def first_lane_environment() -> dict[str, str | None]:
    """The variables this worker's lane changed, as the first lane has them (None: unset); empty on the first lane."""
    if os.environ.get(WORKER, "gw0") == "gw0":
        return {}
    base = Path(os.environ["METALAKE_STACK__DIR"]).parents[1]
    first: dict[str, str | None] = dict.fromkeys(SECOND_LANE_PORTS)
    first["METALAKE_STACK__DIR"] = str(base)
    first["METALAKE_ENV_FILE"] = str(base / "stack.env")
    first.update(stack_paths(base))
    return first
