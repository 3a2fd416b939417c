"""Real access tokens for API tests, minted by the real authorization server.

    from tests._support.tokens import auth_headers
    app = create_app(settings, mongo=mongo)
    with TestClient(app) as client:
        headers = auth_headers(client, tenant="it-1234", role="admin")       # tenant:admin ... of it-1234
        headers = auth_headers(client, platform_admin=True)                   # platform:admin
        headers = auth_headers(client, tenant=t, role="read-only", scope="tenant:read")  # a subset of the role
        client.get(f"/v1/tenants/{t}/assets", headers=headers)

Each call creates an API client in the control plane (``metalake_control.clients``) and calls ``POST /oauth/token``
through the TestClient, exactly as a caller would. If the app's settings have no key encryption key, the tests' key
is set on them first (every test process shares it, so the signing keys in the shared database stay usable).
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from pydantic import SecretStr

from api.context import ApiContext
from control.auth.clients import ClientRecord, ClientStore, Role
from ops.settings import Settings
from tenants.naming import CONTROL_DATABASE

TEST_KEY_ENCRYPTION_KEY = "metalake-tests-key-encryption-key-v1"


def ensure_signing(client: TestClient) -> ApiContext:
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    assert isinstance(ctx, ApiContext)
    if ctx.settings.api.key_encryption_key is None:
        ctx.settings.api.key_encryption_key = SecretStr(TEST_KEY_ENCRYPTION_KEY)
    return ctx


def create_api_client(client: TestClient, *, tenant: str | None, role: str) -> tuple[ClientRecord, str]:
    """A stored API client and its secret (``tenant=None`` with ``role="platform-admin"``)."""
    ctx = ensure_signing(client)
    return ClientStore(ctx.mongo[CONTROL_DATABASE]).create(tenant, Role(role), "tests")


def request_token(
    client: TestClient, client_id: str, secret: str, *, scope: str | None = None, method: str = "basic"
) -> dict[str, Any]:
    """The token endpoint's JSON answer; raises if it is not 200."""
    form = {"grant_type": "client_credentials"}
    if scope is not None:
        form["scope"] = scope
    if method == "post":
        response = client.post("/oauth/token", data={**form, "client_id": client_id, "client_secret": secret})
    else:
        response = client.post("/oauth/token", data=form, auth=(client_id, secret))
    assert response.status_code == 200, response.text
    body = response.json()
    assert isinstance(body, dict)
    return body


def access_token(
    client: TestClient,
    *,
    tenant: str | None = None,
    role: str = "admin",
    platform_admin: bool = False,
    scope: str | None = None,
) -> str:
    if platform_admin:
        tenant, role = None, "platform-admin"
    elif tenant is None:
        raise ValueError("a tenant token needs tenant=...; use platform_admin=True for a platform token")
    record, secret = create_api_client(client, tenant=tenant, role=role)
    token = request_token(client, record.client_id, secret, scope=scope)["access_token"]
    assert isinstance(token, str)
    return token


def auth_headers(
    client: TestClient,
    *,
    tenant: str | None = None,
    role: str = "admin",
    platform_admin: bool = False,
    scope: str | None = None,
) -> dict[str, str]:
    """``{"Authorization": "Bearer <real token>"}`` for a fresh client of ``tenant`` with ``role``."""
    token = access_token(client, tenant=tenant, role=role, platform_admin=platform_admin, scope=scope)
    return {"Authorization": f"Bearer {token}"}


def api_settings(settings: Settings, **api: Any) -> Settings:
    """A copy of ``settings`` with the tests' key encryption key and the given ``settings.api`` fields changed."""
    copy = settings.model_copy(deep=True)
    # Tenants' Trino schema names are keyed by the KEK unless secrets.schema_key is set: keep the stack's names.
    stack_kek = settings.secrets.key_encryption_key or settings.api.key_encryption_key
    copy.secrets.schema_key = settings.secrets.schema_key or stack_kek
    copy.api.key_encryption_key = SecretStr(TEST_KEY_ENCRYPTION_KEY)
    for name, value in api.items():
        setattr(copy.api, name, value)
    return copy
