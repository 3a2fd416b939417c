"""How each lake command (``python -m processors.lake <command>``) talks to its operator: progress lines on stderr,
the report as JSON on stdout (for scripts), one ``error:`` line and exit code 2 for a refused request, a traceback and
1 otherwise.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from metalake.telemetry import configure_telemetry
from metalake.telemetry.settings import TelemetrySettings
from processors.lake.errors import EXIT_USAGE, LakeUsageError


def progress(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr while the command works: the Spark JVM it starts inherits it, and Delta
    prints VACUUM summaries to stdout, which would corrupt the JSON report scripts read there."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def run(command: str, telemetry: TelemetrySettings, body: Callable[[], Mapping[str, Any]]) -> int:
    """Run ``body`` (which builds its report) with telemetry configured; return the process exit code."""
    configure_telemetry(telemetry, f"lake-{command}")
    try:
        with _stdout_to_stderr():
            report = body()
    except LakeUsageError as exc:
        progress(f"error: {exc}")
        return EXIT_USAGE
    sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
    sys.stdout.flush()
    return 0
