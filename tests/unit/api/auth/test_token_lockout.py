"""Wrong secrets sent for a client id from one address throttle that address only: the client keeps getting tokens
from its own address while an attacker hammers its id from another (failures are charged per client and peer)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import threading
from collections.abc import Mapping
from typing import Any

import httpx

from control.auth.settings import ApiSettings
from ops.settings import Settings
from tests._support.api_app import build_app

_TOKEN = {"token_type": "Bearer", "access_token": "t", "expires_in": 900, "scope": "tenant:read"}


class _Server:
    """The authorization server's answers: a token for client ``mlc_x`` with secret ``right``, else invalid_client."""

    def token(self, headers: Mapping[str, str], form: Mapping[str, str]) -> tuple[int, dict[str, Any], list[Any]]:
        if form.get("client_id") == "mlc_x" and form.get("client_secret") == "right":
            return 200, dict(_TOKEN), []
        return 401, {"error": "invalid_client"}, []


def _form(secret: str, client_id: str = "mlc_x") -> dict[str, str]:
    return {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret}


def _client(app: Any, host: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=(host, 40000)), base_url="http://api")


def test_an_attacker_elsewhere_cannot_lock_a_client_out_of_the_token_endpoint() -> None:
    # Every budget but the failures' is small too: before the fix the client's own bucket was charged by anyone.
    api = ApiSettings(rate_limit_per_s=0.001, rate_limit_burst=5, token_failure_rate_per_s=0.001, token_failure_burst=3)
    app, _ = build_app(Settings(api=api))
    app.state.auth = dataclasses.replace(app.state.auth, server=_Server())

    async def scenario() -> None:
        async with _client(app, "203.0.113.9") as attacker, _client(app, "198.51.100.1") as owner:
            tried = [(await attacker.post("/oauth/token", data=_form(f"guess{i}"))).status_code for i in range(12)]
            assert tried[:3] == [401, 401, 401] and set(tried[3:]) == {429}
            # Basic credentials name the same client: refused from that address too, unchecked.
            basic = base64.b64encode(b"mlc_x:guess").decode()
            refused = await attacker.post(
                "/oauth/token", data={"grant_type": "client_credentials"}, headers={"Authorization": f"Basic {basic}"}
            )
            assert refused.status_code == 429 and "Retry-After" in refused.headers
            for _ in range(8):
                ok = await owner.post("/oauth/token", data=_form("right"))
                assert ok.status_code == 200, ok.text
            # The owner's own wrong secrets are its own address's budget, apart from the attacker's.
            assert (await owner.post("/oauth/token", data=_form("typo"))).status_code == 401
            # Another client id from the attacker's address has its own failure budget.
            assert (await attacker.post("/oauth/token", data=_form("x", client_id="mlc_y"))).status_code == 401

    asyncio.run(scenario())


class _SlowServer(_Server):
    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.threads: list[str] = []

    def token(self, headers: Mapping[str, str], form: Mapping[str, str]) -> tuple[int, dict[str, Any], list[Any]]:
        self.threads.append(threading.current_thread().name)
        self.started.set()
        assert self.release.wait(10)
        return super().token(headers, form)


def test_secret_checks_run_on_their_own_bounded_pool() -> None:
    """A token request's scrypt runs on the secret checks' own threads, not on Starlette's shared pool, and a full
    secret-check pool is a 503 at once (with the RFC 6749 error member), not a queue."""
    app, _ = build_app(Settings(api=ApiSettings(token_secret_workers=1, token_secret_queue=0)))
    server = _SlowServer()
    app.state.auth = dataclasses.replace(app.state.auth, server=server)

    async def scenario() -> None:
        async with _client(app, "198.51.100.1") as owner, _client(app, "198.51.100.2") as other:
            first = asyncio.ensure_future(owner.post("/oauth/token", data=_form("right")))
            while not server.started.is_set():
                await asyncio.sleep(0.01)
            busy = await asyncio.wait_for(other.post("/oauth/token", data=_form("right")), 2)
            assert busy.status_code == 503 and busy.headers["Retry-After"] == "1"
            assert busy.json()["error"] == "temporarily_unavailable"
            server.release.set()
            assert (await asyncio.wait_for(first, 5)).status_code == 200
        assert server.threads and all(t.startswith("work-token-secret-check") for t in server.threads)

    try:
        asyncio.run(scenario())
    finally:
        server.release.set()
