"""The soak's faults, one every ``--fault-every``, in turn: SIGKILL of the stream job, of propagation, of outbound
(the process group: the driver and its JVM, as a container's kill); Kafka and FerretDB restarted (stopped as the stack
stops them, started again); the webhook receiver down for two minutes.

The local stack has no supervisor: a killed process stays down. So after a kill the bench waits ``SUPERVISOR_WAIT_S``
for something else to bring it back, and if nothing does, starts it again itself (``metalake stack up <service>``), as
an operator's supervisor (systemd, Kubernetes) would; each fault's record says which happened."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ops.stack import process as proc
from ops.stack.manager import StackError, StackManager
from soak.receiver import Receiver

KINDS = ("kill-stream", "kill-propagation", "kill-outbound", "restart-kafka", "restart-ferretdb", "receiver-down")
SUPERVISOR_WAIT_S = 10.0
RECEIVER_DOWN_S = 120.0
START_ATTEMPTS = 5  # a supervisor keeps restarting; the stack gives up on one start after stack.start_timeout_s


@dataclass
class Fault:
    kind: str
    at: float  # unix time it began
    back: float | None = None  # unix time the service was healthy (the receiver listening) again
    notes: list[str] = field(default_factory=list)


class Faults:
    def __init__(self, stack: StackManager, receiver: Receiver, kinds: list[str], say: Callable[[str], None]) -> None:
        self.stack, self.receiver, self.kinds, self.say = stack, receiver, kinds, say
        self.done: list[Fault] = []
        self.busy = threading.Lock()

    def _record(self, service: str) -> proc.PidRecord | None:
        record = proc.PidRecord.read(self.stack.context.run_dir(service) / "pid")
        return record if record is not None and proc.alive(record) else None

    def inject(self, n: int) -> Fault:
        """The n-th fault of the run (the kinds in turn); returns once the service is back."""
        kind = self.kinds[n % len(self.kinds)]
        fault = Fault(kind, time.time())
        self.done.append(fault)
        with self.busy:
            if kind.startswith("kill-"):
                self._kill(kind.removeprefix("kill-"), fault)
            elif kind.startswith("restart-"):
                self._restart(kind.removeprefix("restart-"), fault)
            else:
                self._receiver_down(fault)
        fault.back = time.time()
        self.say(f"fault {kind}: back after {fault.back - fault.at:.0f}s ({'; '.join(fault.notes)})")
        return fault

    def _kill(self, service: str, fault: Fault) -> None:
        record = self._record(service)
        if record is None:
            fault.notes.append(f"{service} was not running")
        else:
            os.killpg(os.getpgid(record.pid), signal.SIGKILL)
            fault.notes.append(f"SIGKILL to {service}'s process group (pid {record.pid})")
        time.sleep(SUPERVISOR_WAIT_S)
        again = self._record(service)
        if again is not None and (record is None or again.pid != record.pid):
            fault.notes.append(f"restarted by something else (pid {again.pid})")
            return
        fault.notes.append(f"not restarted by the stack within {SUPERVISOR_WAIT_S:.0f}s: restarted by the bench")
        self._start(service, fault)

    def _restart(self, service: str, fault: Fault) -> None:
        """Only this service: ``stack down kafka`` would stop everything that requires Kafka too."""
        record = self._record(service)
        if record is not None:
            proc.stop(record, self.stack.context.settings.stack.stop_timeout_s)
            (self.stack.context.run_dir(service) / "pid").unlink(missing_ok=True)
        fault.notes.append(f"{service} stopped (SIGTERM) after {time.time() - fault.at:.1f}s")
        self._start(service, fault)

    def _start(self, service: str, fault: Fault) -> None:
        """``metalake stack up <service>`` until it is healthy, as a supervisor restarts a process that failed to
        start; each failed attempt is noted."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                self.stack.up([service])
                return
            except StackError as exc:
                fault.notes.append(f"start attempt {attempt} failed: {str(exc)[:120]}")
        fault.notes.append(f"{service} still down after {START_ATTEMPTS} attempts")

    def _receiver_down(self, fault: Fault) -> None:
        self.receiver.down()
        fault.notes.append(f"receiver closed for {RECEIVER_DOWN_S:.0f}s")
        time.sleep(RECEIVER_DOWN_S)
        self.receiver.up()
