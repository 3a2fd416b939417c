"""The admin API as the demo uses it: a platform-admin client kept in .stack (created once), tokens, JSON calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from ops.settings import Settings


class ApiError(RuntimeError):
    """A call answered something the demo did not expect; the message names the call and the service log."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # None: no answer at all


def admin_file(settings: Settings) -> Path:
    return settings.local_stack_dir / "demo-admin.json"


def load_or_create_admin(settings: Settings) -> tuple[str, str, bool]:
    """(client_id, secret, created): the platform-admin client the demo stored in .stack, or a new one.

    ``metalake api create-admin`` prints the secret once; it goes straight into an owner-only file, never to the
    terminal or a log.
    """
    path = admin_file(settings)
    if path.is_file():
        doc = json.loads(path.read_text())
        return doc["client_id"], doc["client_secret"], False
    result = subprocess.run(
        [sys.executable, "-m", "ops", "api", "create-admin", "--name", "metalake-demo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise ApiError(f"metalake api create-admin failed (exit {result.returncode}): {result.stderr.strip()[-500:]}")
    doc = json.loads(result.stdout)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"client_id": doc["client_id"], "client_secret": doc["client_secret"]}, out)
    return doc["client_id"], doc["client_secret"], True


class ApiClient:
    """JSON over HTTP with a bearer token; every unexpected status raises ApiError with the problem's detail."""

    def __init__(self, base_url: str, timeout_s: float = 60.0) -> None:
        self.base_url = base_url
        self._http = httpx.Client(base_url=base_url, timeout=timeout_s)
        self._token: str | None = None

    def close(self) -> None:
        self._http.close()

    def token(self, client_id: str, secret: str) -> dict[str, Any]:
        """Client credentials grant; the token is used by later calls (and never printed)."""
        try:
            resp = self._http.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=(client_id, secret))
        except httpx.HTTPError as exc:
            raise ApiError(
                f"POST /oauth/token: {type(exc).__name__} ({self.base_url}). Is the API up? Start it with "
                "`metalake stack up --with-processors`; read `metalake stack logs api`"
            ) from exc
        if resp.status_code != 200:
            raise ApiError(f"POST /oauth/token answered {resp.status_code}: {_detail(resp)}", resp.status_code)
        body: dict[str, Any] = resp.json()
        self._token = body["access_token"]
        return body

    def call(self, method: str, path: str, *, expect: tuple[int, ...] = (200,), **kwargs: Any) -> httpx.Response:  # noqa: ANN401
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        try:
            resp = self._http.request(method, path, headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(
                f"{method} {path}: {type(exc).__name__} ({self.base_url}); is the API up? metalake stack logs api"
            ) from exc
        if resp.status_code not in expect:
            raise ApiError(
                f"{method} {path} answered {resp.status_code}: {_detail(resp)}; see metalake stack logs api",
                resp.status_code,
            )
        return resp

    def json(self, method: str, path: str, *, expect: tuple[int, ...] = (200,), **kwargs: Any) -> Any:  # noqa: ANN401
        return self.call(method, path, expect=expect, **kwargs).json()


def _detail(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:200]
    if isinstance(body, dict):
        return str(body.get("detail") or body.get("error_description") or body.get("error") or body)[:300]
    return str(body)[:300]
