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
from itest import wait_for
from pydantic import SecretStr
from pymongo import MongoClient

from api.auth.keys import KeyEncryption
from control.auth.clients import ClientStore
from metalake.settings import Settings
from tenants.naming import CONTROL_DATABASE

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
    server = subprocess.Popen([METALAKE, "api"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
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
    finally:
        server.terminate()
        server.wait(timeout=30)
        ClientStore(mongo[CONTROL_DATABASE]).revoke(admin["client_id"])
    assert server.stderr is not None
    assert admin["client_secret"] not in server.stderr.read()
