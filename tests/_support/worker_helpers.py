"""Setting connectors up for the runtime's integration tests, as a tenant admin would: through the admin API with a
real token (the test plugins served beside the installed ones). A test that only needs a record may write it with
the control plane's store (``control.connectors.store.ControlStore``) instead."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from fastapi.testclient import TestClient

from api.app import create_app as create_api
from api.routes.connectors import connector_plugins
from connectors.runtime.context import plugins_from
from control.connectors import registry
from control.connectors.registry import ConnectorClass
from ops.settings import Settings
from tests._support.runtime_plugins import PLUGINS, sign
from tests._support.tokens import auth_headers


def worker_settings(settings: Settings, **connect: Any) -> Settings:
    """A copy of ``settings`` for a test worker: short publish timeout, a 64 KiB webhook limit, and no lookup cache,
    so a change made through the admin API reaches the worker's next request (a test of the cache sets a TTL)."""
    copy = settings.model_copy(deep=True)
    copy.connect.publish_timeout_ms = 5000
    copy.connect.retry_after_s = 7
    copy.connect.webhook_max_body_bytes = 64 * 1024
    copy.connect.lookup_cache_ttl_s = 0.0
    for key, value in connect.items():
        setattr(copy.connect, key, value)
    return copy


@contextmanager
def admin_api(settings: Settings, plugins: Mapping[str, ConnectorClass] = PLUGINS) -> Iterator[TestClient]:
    """The admin API over the stack's control plane; its connector types are the installed ones plus ``plugins``."""
    app = create_api(settings)
    app.dependency_overrides[connector_plugins] = lambda: {**registry.plugins(), **plugins_from(plugins)}
    with TestClient(app) as client:
        yield client


def connectors_route(tenant: str, name: str | None = None) -> str:
    route = f"/v1/tenants/{tenant}/connectors"
    return route if name is None else f"{route}/{name}"


def tenant_admin(api: TestClient, tenant: str) -> dict[str, str]:
    """Authorization headers of a fresh tenant-admin client of ``tenant`` (a real token)."""
    return auth_headers(api, tenant=tenant, role="admin")


def create_connector(api: TestClient, admin: dict[str, str], tenant: str, name: str, **spec: Any) -> dict[str, Any]:
    """Create a connector through the admin API (``spec``: type, config, transforms, tasks_max...); its view."""
    created = api.post(connectors_route(tenant), json={"name": name, "config": {}, **spec}, headers=admin)
    assert created.status_code == 201, created.text
    view: dict[str, Any] = created.json()
    return view


def configure_hook(api: TestClient, tenant: str, secret: str, **spec: Any) -> dict[str, str]:
    """The test webhook connector ``hook`` of ``tenant`` with ``secret`` active; the tenant admin's headers."""
    admin = tenant_admin(api, tenant)
    create_connector(api, admin, tenant, "hook", type="testhook", **spec)
    added = api.post(connectors_route(tenant, "hook") + "/secrets", json={"secret": secret}, headers=admin)
    assert added.status_code == 201, added.text
    assert "secret" not in added.json()
    return admin


def post_signed(
    client: TestClient, tenant: str, secret: str, payload: dict[str, Any], traceparent: str | None = None
) -> Any:
    body = json.dumps(payload).encode()
    headers = {"x-test-signature": sign(secret, body), "content-type": "application/json"}
    if traceparent is not None:
        headers["traceparent"] = traceparent
    return client.post(f"/webhooks/test-hook/{tenant}", content=body, headers=headers)
