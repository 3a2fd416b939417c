"""Prometheus' HTTP API, as the tests read it: the targets' health and instant queries."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - a loopback URL the test built
        body = json.loads(resp.read())
    assert body["status"] == "success", body
    return body["data"]


def target_health(url: str) -> dict[str, str]:
    """Each active target's health ("up", "down", "unknown") and last error, by job."""
    data = _get(f"{url}/api/v1/targets?state=active")
    return {t["labels"]["job"]: f"{t['health']} {t['lastError']}".strip() for t in data["activeTargets"]}


def query(url: str, promql: str) -> list[dict[str, Any]]:
    """An instant query's samples."""
    result: list[dict[str, Any]] = _get(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}")["result"]
    return result


def wait_targets_up(url: str, jobs: Iterable[str], timeout_s: float = 60) -> dict[str, str]:
    """Wait until every job's target was scraped successfully; fail naming those that were not, with their error."""
    wanted = set(jobs)
    deadline = time.monotonic() + timeout_s
    while True:
        health = target_health(url)
        down = {job: health.get(job, "not a target") for job in wanted if health.get(job) != "up"}
        if not down:
            return health
        assert time.monotonic() < deadline, f"targets not up after {timeout_s:.0f}s: {down}"
        time.sleep(1)


def fetched(root: Path, stack_dir: Path) -> Path:
    """The bin folder of Debian's prometheus package in the stack's cache, fetched now if it is not there (the
    script waits on a fetch already running, e.g. the prefetch's)."""
    env = {**os.environ, "STACK_DIR": str(stack_dir), "REPO_DIR": str(root)}
    script = root / "deploy" / "local" / "fetch" / "prometheus.sh"
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{script} failed:\n{done.stdout}\n{done.stderr}"
    return stack_dir / "cache" / "prometheus" / "bin"


def rule_groups(url: str) -> dict[str, int]:
    """The loaded rule groups and how many rules each holds."""
    return {g["name"]: len(g["rules"]) for g in _get(f"{url}/api/v1/rules")["groups"]}
