"""``metalake dlq`` against a scripted API: credentials from the environment, pages followed, a bulk replay with
progress per letter and an exit code that says whether any letter was refused."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from ops.cli import dlq

LETTERS = [
    {"id": f"connectors-0-{n}", "time": "2026-05-01T12:00:00Z", "stage": "mapping", "error_class": "InvalidPayload",
     "connector": "mc", "field": "payload/event_list/0/mcon", "reason": "warehouse not mapped", "replay": None}
    for n in range(3)
]  # fmt: skip


class ScriptedApi:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.calls.append((request.method, request.url.path))
        if request.url.path == "/oauth/token":
            assert request.headers["authorization"].startswith("Basic ")
            return httpx.Response(200, json={"access_token": "tok"})
        assert request.headers["authorization"] == "Bearer tok"
        if request.method == "GET":
            cursor = request.url.params.get("cursor")
            assert request.url.params.get("connector") == "mc"
            if cursor is None:
                return httpx.Response(200, json={"items": LETTERS[:2], "next_cursor": "c1", "truncated": False})
            return httpx.Response(200, json={"items": LETTERS[2:], "next_cursor": None, "truncated": False})
        letter = request.url.path.split("/")[-2]
        if letter.endswith("-2"):
            problem = {"type": "/problems/replay-refused", "detail": "warehouse not mapped", "field": "mcon"}
            return httpx.Response(409, json=problem)
        replay = {"status": "replayed", "by": "x", "claimed_at": "2026-05-01T12:00:00Z"}
        return httpx.Response(200, json={"letter": letter, "outcome": "replayed", "published": 1, "replay": replay})


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> ScriptedApi:
    scripted = ScriptedApi()
    monkeypatch.setattr(
        dlq, "make_http", lambda base: httpx.Client(base_url=base, transport=httpx.MockTransport(scripted.handle))
    )
    monkeypatch.setenv("METALAKE_CLIENT_ID", "cid")
    monkeypatch.setenv("METALAKE_CLIENT_SECRET", "csecret")
    monkeypatch.delenv("METALAKE_TOKEN", raising=False)
    return scripted


def test_list_follows_pages(api: ScriptedApi) -> None:
    result = CliRunner().invoke(dlq.app, ["list", "-t", "acme", "--connector", "mc", "--api", "http://api"])
    assert result.exit_code == 0, result.output
    assert [line.split("\t")[0] for line in result.stdout.splitlines()] == [d["id"] for d in LETTERS]


def test_a_bulk_replay_shows_progress_and_fails_when_one_is_refused(api: ScriptedApi) -> None:
    args = ["replay", "-t", "acme", "--connector", "mc", "--yes", "--api", "http://api"]
    result = CliRunner().invoke(dlq.app, args)
    assert result.exit_code == 1
    assert "[1/3] connectors-0-0: replayed (1 published)" in result.stderr
    assert "[3/3] connectors-0-2: refused: warehouse not mapped (field mcon)" in result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["replayed"] == 2
    posts = [path for method, path in api.calls if method == "POST" and path != "/oauth/token"]
    assert posts == [f"/v1/tenants/acme/dead-letters/{d['id']}/replay" for d in LETTERS]


def test_credentials_come_from_the_environment_only(monkeypatch: pytest.MonkeyPatch, api: Any) -> None:
    monkeypatch.delenv("METALAKE_CLIENT_SECRET")
    result = CliRunner().invoke(dlq.app, ["list", "-t", "acme", "--api", "http://api"])
    assert result.exit_code == 2 and "METALAKE_CLIENT_SECRET" in result.stderr
