"""What an operator's supervisor does for the processes nobody killed on purpose: one that exits during the soak (a
crash: a product bug the soak found) is noted with the last line of its log that names an error, and started again.
Checked every ``CHECK_S`` while no fault is in progress (a fault's own restarts are the fault's)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ops.stack import process as proc
from ops.stack.manager import StackError, StackManager
from soak.faults import Faults

CHECK_S = 10.0
WATCHED = ("stream", "api", "connect", "propagation", "outbound", "access", "lake-worker")


@dataclass
class Exit:
    service: str
    at: float  # unix time it was found gone
    error: str  # the last log line naming an exception or error
    restarted: bool


def last_error(stack: StackManager, service: str) -> str:
    """The last line of the service's log that names an exception (a traceback's last line), cut to 200 chars."""
    try:
        lines = stack.log_path(service).read_text(errors="replace").splitlines()[-400:]
    except OSError:
        return "(no log)"
    named = [line for line in lines if "Exception" in line or "Error" in line]
    return named[-1].strip()[:200] if named else "(no error in the log's tail)"


class Supervisor:
    def __init__(self, stack: StackManager, faults: Faults, say: Callable[[str], None]) -> None:
        self.stack, self.faults, self.say = stack, faults, say
        self.exits: list[Exit] = []

    def _alive(self, service: str) -> bool:
        record = proc.PidRecord.read(self.stack.context.run_dir(service) / "pid")
        return record is not None and proc.alive(record)

    def check(self, n: int) -> None:
        if not self.faults.busy.acquire(blocking=False):
            return  # a fault is in progress: its service is down on purpose
        try:
            for service in WATCHED:
                if not self._alive(service):
                    self._restart(service)
        finally:
            self.faults.busy.release()

    def _restart(self, service: str) -> None:
        found = Exit(service, time.time(), last_error(self.stack, service), restarted=False)
        self.exits.append(found)
        self.say(f"UNPLANNED EXIT of {service}: {found.error}; restarting it")
        try:
            self.stack.up([service])
            found.restarted = True
        except StackError as exc:
            self.say(f"{service} did not start again: {exc}")
