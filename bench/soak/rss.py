"""Resident memory of every process of the stack, sampled every ``INTERVAL_S`` from /proc: a service is its whole
process group (the stream job's Python driver and its JVM, FerretDB, Kafka, ...), so a child's growth counts. The
machine's load average is sampled with it (the machine is shared)."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ops.stack import process as proc
from ops.stack.manager import StackManager
from ops.stack.services import SERVICES

INTERVAL_S = 10.0
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Sample:
    at: float
    rss: dict[str, int]  # service -> bytes (its process group)
    pids: dict[str, int]  # service -> the group leader's pid (a new pid: restarted)
    load1: float


def group_rss() -> dict[int, int]:
    """Process group id -> resident bytes of all its processes."""
    out: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            statm = (entry / "statm").read_text().split()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        pgrp = int(fields[2])
        out[pgrp] = out.get(pgrp, 0) + int(statm[1]) * PAGE
    return out


@dataclass
class Sampler:
    stack: StackManager
    samples: list[Sample] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def leaders(self) -> dict[str, int]:
        out = {}
        for service in SERVICES:
            record = proc.PidRecord.read(self.stack.context.run_dir(service.name) / "pid")
            if record is not None and proc.alive(record):
                out[service.name] = record.pid
        return out

    def sample(self) -> Sample:
        leaders = self.leaders()
        groups = group_rss()
        rss = {name: groups.get(pid, 0) for name, pid in leaders.items()}
        return Sample(time.time(), rss, leaders, os.getloadavg()[0])

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples.append(self.sample())
            self.stop.wait(INTERVAL_S)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="soak-rss", daemon=True)
        thread.start()
        return thread
