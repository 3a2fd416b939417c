"""Each provisioning step's wall time in ``metalake_provisioning_step_seconds{action, step, outcome}``: done, failed
(the error goes on) or interrupted (the worker stopped), so the step that grows with the tenant count shows."""

from __future__ import annotations

import time

import pytest

from control.provisioning.provisioner import timed_step
from control.provisioning.steps import StepFailed, StepInterrupted
from metalake.telemetry.exposition import install_meter_provider, render
from tests._support.scrape import sample


class _Step:
    name = "access"


def _count(action: str, outcome: str) -> float:
    labels = {"action": action, "step": "access", "outcome": outcome}
    return sample(render().decode(), "metalake_provisioning_step_seconds_count", labels)


def _sum(action: str, outcome: str) -> float:
    labels = {"action": action, "step": "access", "outcome": outcome}
    return sample(render().decode(), "metalake_provisioning_step_seconds_sum", labels)


def test_a_step_done_is_timed_under_its_action_and_name() -> None:
    install_meter_provider()
    before, before_sum = _count("provision", "done"), _sum("provision", "done")
    timed_step("provision", _Step(), lambda: time.sleep(0.05))  # type: ignore[arg-type]
    assert _count("provision", "done") == before + 1
    assert _sum("provision", "done") - before_sum >= 0.05


def test_a_failed_or_interrupted_step_is_timed_and_its_error_goes_on() -> None:
    install_meter_provider()
    failed, interrupted = _count("deprovision", "failed"), _count("deprovision", "interrupted")

    def fails() -> None:
        raise StepFailed("lake drop exited with 1")

    def stops() -> None:
        raise StepInterrupted("drop")

    with pytest.raises(StepFailed):
        timed_step("deprovision", _Step(), fails)  # type: ignore[arg-type]
    with pytest.raises(StepInterrupted):
        timed_step("deprovision", _Step(), stops)  # type: ignore[arg-type]
    assert _count("deprovision", "failed") == failed + 1
    assert _count("deprovision", "interrupted") == interrupted + 1
