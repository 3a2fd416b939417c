"""make test's two lanes (tests/_support/lanes.py): the second worker gets a stack folder and ports of its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ops.stack.paths import stack_paths
from ops.stack.settings import StackPorts
from tests._support import lanes


@pytest.fixture
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    # Every variable use_lane writes goes through monkeypatch first, so the test session's are restored after it (a
    # second lane's ports and paths left behind pointed the rest of a worker's session at the other lane's stack).
    touched = [lanes.WORKER, "METALAKE_STACK__DIR", "METALAKE_ENV_FILE", *lanes.SECOND_LANE_PORTS]
    for name in [*touched, *stack_paths(tmp_path)]:
        monkeypatch.setenv(name, "")  # recorded, so undone even if unset before (delenv records only what it finds)
        monkeypatch.delenv(name)
    # use_lane writes the process's environment: monkeypatch restores what it set.
    monkeypatch.setenv("METALAKE_STACK__DIR", str(tmp_path / ".stack"))
    monkeypatch.setenv("METALAKE_ENV_FILE", "untouched")
    return tmp_path / ".stack"


def test_the_first_lane_and_a_session_without_workers_keep_the_checkout_stack(
    bare: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for worker in (None, "gw0"):
        if worker:
            monkeypatch.setenv(lanes.WORKER, worker)
        lanes.use_lane(bare.parent)
        assert lanes.first_lane_environment() == {}
    assert not (bare / "lanes").exists()
    assert not set(lanes.SECOND_LANE_PORTS) & set(os.environ)


def test_the_second_lane_has_its_folder_the_shared_cache_and_every_stack_port_moved(
    bare: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(lanes.WORKER, "gw1")
    lanes.use_lane(bare.parent)
    lane = bare / "lanes" / "gw1"
    assert os.environ["METALAKE_STACK__DIR"] == str(lane)
    assert os.environ["METALAKE_ENV_FILE"] == str(lane / "stack.env")
    assert (lane / "cache").resolve() == (bare / "cache").resolve()
    ports = {name: os.environ[name] for name in lanes.SECOND_LANE_PORTS}
    moved = {name.removeprefix("METALAKE_STACK__PORTS__").lower() for name in ports}
    assert set(StackPorts.model_fields) <= moved, "a stack port the second lane would share with the first"
    defaults = set(StackPorts().model_dump().values())
    assert not defaults & {int(port) for port in ports.values()}


def test_the_second_lane_has_its_own_lake_and_checkpoints_whatever_it_inherits(
    bare: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The xdist controller's tests/conftest.py named the first lane's paths before the worker started.
    for variable, value in stack_paths(bare).items():
        monkeypatch.setenv(variable, value)
    monkeypatch.setenv(lanes.WORKER, "gw1")
    lanes.use_lane(bare.parent)
    lane = bare / "lanes" / "gw1"
    assert os.environ["METALAKE_LAKE__ROOT"] == str(lane / "data" / "lake")
    assert os.environ["METALAKE_LAKE__CHECKPOINT_ROOT"] == str(lane / "data" / "checkpoints")
    assert all(os.environ[variable] == value for variable, value in stack_paths(lane).items())


def test_the_unit_tests_on_the_second_lane_see_the_first_lanes_stack(
    bare: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(lanes.WORKER, "gw1")
    lanes.use_lane(bare.parent)
    first = lanes.first_lane_environment()
    assert first["METALAKE_STACK__DIR"] == str(bare)
    assert first["METALAKE_ENV_FILE"] == str(bare / "stack.env")
    assert first["METALAKE_SPARK__JARS_DIR"] == str(bare / "cache" / "spark" / "jars")
    assert all(first[name] is None for name in lanes.SECOND_LANE_PORTS)


def test_the_unit_suite_runs_with_the_first_lanes_view() -> None:
    # tests/unit/conftest.py's fixture, on whichever worker runs this test (the second lane's file is lanes/gw1's).
    assert "lanes" not in Path(os.environ["METALAKE_ENV_FILE"]).parts


def test_a_third_worker_is_refused(bare: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(lanes.WORKER, "gw2")
    with pytest.raises(RuntimeError, match="two lanes at most"):
        lanes.use_lane(bare.parent)
