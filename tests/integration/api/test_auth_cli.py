"""``metalake api`` as an operator uses it: bootstrap a platform admin, serve, get a token over HTTP, rotate keys."""

from __future__ import annotations

import base64
import json
import os
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from pymongo import MongoClient

from api.app import create_app
from api.auth.keys import KeyEncryption
from api.services import audit
from control.audit import AuditQuery, read
from control.auth.clients import ClientStore, Role
from ops.settings import Settings
from tenants.naming import CONTROL_DATABASE, platform_audit_dir
from tests._support.itest import wait_for
from tests._support.tokens import api_settings, request_token

pytestmark = pytest.mark.integration

Mongo = MongoClient[dict[str, Any]]
METALAKE = str(Path(sys.executable).with_name("metalake"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([METALAKE, "api", *args], env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def env(mongo: Mongo) -> Iterator[dict[str, str]]:
    kek = f"cli-tests-{secrets.token_hex(8)}"
    port = _free_port()
    out = {**os.environ, "METALAKE_API__KEY_ENCRYPTION_KEY": kek, "METALAKE_API__PORT": str(port)}
    yield out
    mongo[CONTROL_DATABASE]["signing_keys"].delete_many({"kek_id": KeyEncryption(SecretStr(kek)).kek_id})


def _kid(token: str) -> str:
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    return str(header["kid"])


def test_help_lists_the_commands() -> None:
    result = subprocess.run([METALAKE, "api", "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0
    assert "create-admin" in result.stdout and "rotate-keys" in result.stdout and "--port" in result.stdout
    for command in ("list-admins", "rotate-admin", "revoke-admin"):
        assert command in result.stdout
    revoke = subprocess.run(
        [METALAKE, "api", "revoke-admin", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert revoke.returncode == 0 and "--force" in revoke.stdout


def test_serve_refuses_to_start_without_a_key_encryption_key(settings: Settings, tmp_path: Path) -> None:
    # `metalake stack up` keeps a generated key in .stack/stack.env: read the stack's addresses without it.
    stack_env = settings.local_stack_dir / "stack.env"
    lines = stack_env.read_text().splitlines() if stack_env.is_file() else []
    env_file = tmp_path / "stack.env"
    env_file.write_text("".join(f"{line}\n" for line in lines if not line.startswith("METALAKE_API__")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("METALAKE_API__")}
    env.update(METALAKE_ENV_FILE=str(env_file), METALAKE_API__PORT=str(_free_port()))
    result = _run([], env)
    assert result.returncode == 1 and "METALAKE_API__KEY_ENCRYPTION_KEY" in result.stderr


def test_bootstrap_serve_token_rotate(settings: Settings, mongo: Mongo, env: dict[str, str], tenant: str) -> None:
    created = _run(["create-admin", "--name", "cli-test"], env)
    assert created.returncode == 0, created.stderr
    admin = json.loads(created.stdout)
    assert admin["client_id"].startswith("mlc_") and admin["scopes"] == ["platform:admin"]
    assert admin["client_secret"] not in created.stderr
    port = int(env["METALAKE_API__PORT"])
    base = f"http://127.0.0.1:{port}"
    # uvicorn's access log goes to stdout, its other lines to stderr: both are read.
    server = subprocess.Popen([METALAKE, "api"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:

        def up() -> bool:
            try:
                return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for("metalake api to answer /healthz", up, timeout_s=60)
        credentials = (admin["client_id"], admin["client_secret"])

        def token() -> str:
            r = httpx.post(f"{base}/oauth/token", data={"grant_type": "client_credentials"}, auth=credentials)
            assert r.status_code == 200, r.text
            return str(r.json()["access_token"])

        first = token()
        meta = httpx.get(f"{base}/.well-known/oauth-authorization-server").json()
        assert meta["issuer"] == base and meta["token_endpoint"] == f"{base}/oauth/token"
        listed = httpx.get(f"{base}/v1/tenants/{tenant}/clients", headers={"Authorization": f"Bearer {first}"})
        assert listed.status_code == 200 and listed.json() == {"items": [], "next_cursor": None}

        rotated = _run(["rotate-keys"], env)
        assert rotated.returncode == 0, rotated.stderr
        report = json.loads(rotated.stdout)
        assert report["active"] != _kid(first)
        old = next(k for k in report["keys"] if k["kid"] == _kid(first))
        assert old["active"] is False and old["expires_at"] is not None
        second = token()
        assert _kid(second) == report["active"]
        for bearer in (first, second):  # the old key's tokens stay valid until it is retired
            r = httpx.get(f"{base}/v1/tenants/{tenant}/clients", headers={"Authorization": f"Bearer {bearer}"})
            assert r.status_code == 200
        # Secrets in paths (issue 21, item 11): a share link's id and an engine key never reach the access log.
        assert httpx.get(f"{base}/share/s3cretShareId{tenant}/data.csv").status_code == 404
        opa = httpx.post(f"{base}/v1/opa/mle_0123456789abcdef_s3cretEngineKey/allow", json={"input": {}})
        assert opa.status_code == 401
    finally:
        server.terminate()
        server.wait(timeout=30)
        ClientStore(mongo[CONTROL_DATABASE]).revoke(admin["client_id"])
    assert server.stdout is not None
    logged = server.stdout.read()
    assert admin["client_secret"] not in logged
    assert "s3cret" not in logged
    assert "/share/***/data.csv" in logged and "/v1/opa/mle_0123456789abcdef_***/allow" in logged


def test_list_rotate_revoke_platform_admins(settings: Settings, mongo: Mongo, env: dict[str, str], tenant: str) -> None:
    # Another active platform admin, so the one revoked below is not the last (that takes --force): on a stack of its
    # own (make test's second lane) no earlier test has left one.
    other = _run(["create-admin", "--name", "cli-admins-other"], env)
    assert other.returncode == 0, other.stderr
    created = _run(["create-admin", "--name", "cli-admins"], env)
    assert created.returncode == 0, created.stderr
    admin = json.loads(created.stdout)
    client_id, first = admin["client_id"], admin["client_secret"]
    store = ClientStore(mongo[CONTROL_DATABASE])
    tenant_client, _ = store.create(tenant, Role.ADMIN, "not an admin")
    # An app in this process with no client cache: what a served API sees once its cache TTL has passed.
    app = create_app(api_settings(settings, client_cache_ttl_s=0.0), mongo=mongo)
    try:
        listed = _run(["list-admins"], env)
        assert listed.returncode == 0, listed.stderr
        items = {item["client_id"]: item for item in json.loads(listed.stdout)["items"]}
        assert items[client_id]["state"] == "active" and items[client_id]["scopes"] == ["platform:admin"]
        assert tenant_client.client_id not in items and first not in listed.stdout
        assert "client_secret" not in listed.stdout

        rotated = _run(["rotate-admin", client_id, "--overlap-seconds", "0"], env)
        assert rotated.returncode == 0, rotated.stderr
        second = json.loads(rotated.stdout)["client_secret"]
        assert second != first and second not in rotated.stderr
        assert _run(["rotate-admin", tenant_client.client_id], env).returncode == 1

        with TestClient(app) as client:
            denied = client.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=(client_id, first))
            assert denied.status_code == 401
            bearer = {"Authorization": f"Bearer {request_token(client, client_id, second)['access_token']}"}
            assert client.get("/v1/tenants", headers=bearer).status_code == 200

            not_admin = _run(["revoke-admin", tenant_client.client_id], env)
            assert not_admin.returncode == 1 and "no such platform-admin client" in not_admin.stderr
            revoked = _run(["revoke-admin", client_id], env)
            assert revoked.returncode == 0, revoked.stderr
            assert json.loads(revoked.stdout)["state"] == "revoked"
            # The gate checks revocation: the token issued before is refused, and no new one is issued.
            refused = client.get("/v1/tenants", headers=bearer)
            assert refused.status_code == 401 and "revoked" in refused.json()["detail"]
            denied = client.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=(client_id, second))
            assert denied.status_code == 401
        kept = store.get(tenant_client.client_id)
        assert kept is not None and kept.active

        rows = read(platform_audit_dir(settings.lake_root), AuditQuery(target_hash=audit.target_hash(client_id)))
        assert sorted((r.action, r.result, r.actor) for r in rows) == [
            ("client.create", "done", "cli"),
            ("client.revoke", "done", "cli"),
            ("client.rotate", "done", "cli"),
        ]
    finally:
        store.revoke(client_id)
        store.revoke(tenant_client.client_id)
