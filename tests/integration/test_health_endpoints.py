"""A processor's health server on the real stack: /readyz says "ok" for MongoDB and Kafka, and names Kafka when the
same processor is pointed at a port nothing listens on; /healthz stays 200 while its loop polls.

Two propagation processors (``metalake propagation run``) run as children, each with its own health port, a fresh
tenant it follows and a fresh consumer group started at the end of the changes topic: they publish nothing.
"""

from __future__ import annotations

import json
import secrets
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import CHANGES_TOPIC
from tests._support.itest import wait_for
from tests._support.outbound_runtime import start_groups_at_end
from tests._support.pipeline_procs import PropagationProcess

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(port: int, path: str) -> tuple[int, dict[str, Any]] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)
    except OSError:
        return None  # not listening yet


def test_readyz_names_kafka_when_it_is_unreachable_and_says_ok_on_the_stack(
    settings: Settings, stack: StackManager, tenant: str, tmp_path: Path
) -> None:
    group = f"it-health-{secrets.token_hex(4)}"
    start_groups_at_end(settings, {group: CHANGES_TOPIC})
    up_port, down_port = _free_port(), _free_port()
    healthy = PropagationProcess(
        tenant, tmp_path / "up.log", group, env={"METALAKE_HEALTH__PORTS__PROPAGATION": str(up_port)}
    )
    no_kafka = PropagationProcess(
        tenant,
        tmp_path / "down.log",
        f"{group}-down",
        env={
            "METALAKE_HEALTH__PORTS__PROPAGATION": str(down_port),
            "METALAKE_KAFKA__BOOTSTRAP_SERVERS": f"127.0.0.1:{_free_port()}",
        },
    )
    try:
        healthy.wait_ready()
        no_kafka.wait_ready()

        ready = wait_for("the processor's /readyz", lambda: _get(up_port, "/readyz"), timeout_s=30)
        assert ready == (200, {"status": "ready", "checks": {"mongo": "ok", "kafka": "ok"}}), healthy.tail()
        assert _get(up_port, "/healthz") == (200, {"status": "ok"})

        down = wait_for("the Kafka-less processor's /readyz", lambda: _get(down_port, "/readyz"), timeout_s=30)
        assert down == (503, {"status": "not-ready", "checks": {"mongo": "ok", "kafka": "down: KafkaException"}})
        # Its loop still polls (and finds no broker): alive, not ready.
        assert _get(down_port, "/healthz") == (200, {"status": "ok"})
    finally:
        assert healthy.stop() == 0, healthy.tail()
        no_kafka.stop()
