"""docs/serving.md's Python example for a tenant's tool runs as written: with ``REQUESTS_CA_BUNDLE`` set, Trino's
certificate is still checked against the CA the example names, and every request carries a token of the admin API,
asked for again before it expires.

The HTTP transport is replaced by one that records what would be sent: to the token URL it answers as the admin
API's ``POST /oauth/token`` answers (a JSON body with ``access_token`` and ``expires_in``), to Trino it answers
nothing (the test ends at the first request, as sent)."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import requests

DOC = Path(__file__).resolve().parents[2] / "docs" / "serving.md"


def _example() -> str:
    text = DOC.read_text("utf-8")
    section = text[text.index("### How a BI tool connects") :]
    block = re.search(r"```python\n(.*?)\n *```", section, re.DOTALL)
    assert block is not None
    return textwrap.dedent(block.group(1))


class Sent(Exception):
    """The request to Trino, stopped once recorded."""


def _transport(monkeypatch: pytest.MonkeyPatch, expires_in: int) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    tokens = iter(f"token-{n}" for n in range(1, 100))

    def send(self: object, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        sent.append({"url": request.url, "verify": kwargs.get("verify"), "auth": request.headers.get("Authorization")})
        if not str(request.url).endswith("/oauth/token"):
            raise Sent
        answer = requests.Response()
        answer.status_code, answer.url, answer.request = 200, str(request.url), request
        answer._content = json.dumps({"access_token": next(tokens), "expires_in": expires_in}).encode()
        return answer

    monkeypatch.setattr("requests.adapters.HTTPAdapter.send", send)
    return sent


def _run(sent: list[dict[str, Any]], queries: int) -> list[dict[str, Any]]:
    names = {"client_id": "mlc_1", "client_secret": "s3cret", "trino_user": "tenant.acme", "schema": "acme_x"}
    exec(compile(_example(), str(DOC), "exec"), names)  # noqa: S102 - the documented example, as written
    for _ in range(queries):
        with pytest.raises(Sent):
            names["conn"].cursor().execute("SELECT 1")
    return [s for s in sent if "trino.example" in str(s["url"])]


def test_trinos_ca_is_checked_even_with_requests_ca_bundle_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "system-bundle.pem"))
    sent = _transport(monkeypatch, expires_in=900)
    to_trino = _run(sent, queries=2)
    assert [s["verify"] for s in to_trino] == ["/path/to/ca.pem"] * 2
    # One token for both queries: it is asked for once, then reused while it is valid.
    assert [s["auth"] for s in to_trino] == ["Bearer token-1"] * 2
    assert sum(str(s["url"]).endswith("/oauth/token") for s in sent) == 1


def test_a_token_about_to_expire_is_asked_for_again(monkeypatch: pytest.MonkeyPatch) -> None:
    sent = _transport(monkeypatch, expires_in=30)  # under the example's one-minute margin: every request renews
    assert [s["auth"] for s in _run(sent, queries=2)] == ["Bearer token-1", "Bearer token-2"]
