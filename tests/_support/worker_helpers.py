"""Configuring the test webhook connector through the management API (integration tests of the runtime)."""

from __future__ import annotations

import json
import secrets
from typing import Any

from fastapi.testclient import TestClient
from pydantic import SecretStr
from runtime_plugins import sign

from metalake.settings import Settings

ADMIN_TOKEN = "it-admin-" + secrets.token_hex(16)
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def worker_settings(settings: Settings, **connect: Any) -> Settings:
    """A copy of ``settings`` for a test worker: an admin token, short publish timeout, a 64 KiB webhook limit."""
    copy = settings.model_copy(deep=True)
    copy.connect.admin_token = SecretStr(ADMIN_TOKEN)
    copy.connect.publish_timeout_ms = 5000
    copy.connect.retry_after_s = 7
    copy.connect.webhook_max_body_bytes = 64 * 1024
    for key, value in connect.items():
        setattr(copy.connect, key, value)
    return copy


def configure_hook(client: TestClient, admin: dict[str, str], tenant: str, secret: str, **spec: Any) -> None:
    put = client.put(f"/connectors/{tenant}/hook", json={"type": "testhook", "config": {}, **spec}, headers=admin)
    assert put.status_code == 201, put.text
    added = client.post(f"/connectors/{tenant}/hook/secrets", json={"secret": secret}, headers=admin)
    assert added.status_code == 201, added.text
    assert "secret" not in added.json()


def post_signed(
    client: TestClient, tenant: str, secret: str, payload: dict[str, Any], traceparent: str | None = None
) -> Any:
    body = json.dumps(payload).encode()
    headers = {"x-test-signature": sign(secret, body), "content-type": "application/json"}
    if traceparent is not None:
        headers["traceparent"] = traceparent
    return client.post(f"/webhooks/test-hook/{tenant}", content=body, headers=headers)
