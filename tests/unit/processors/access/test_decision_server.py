"""The lake decision endpoint's HTTP side: the key in the path checked before the body is read, Trino's request
parsed, the decision's ``result`` answered, a failing decision a 503 (Trino then fails closed), nothing logged."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from control.trino_opa import OpaQuery
from processors.access.decisions import DecisionServer

KEY = "k3y-of-the-lake"
REQUEST = {
    "input": {
        "context": {"identity": {"user": "tenant.acme", "groups": []}, "softwareStack": {"trinoVersion": "476"}},
        "action": {
            "operation": "FilterSchemas",
            "filterResources": [{"schema": {"catalogName": "lake", "schemaName": "acme_x"}}],
        },
    }
}


class _Decide:
    def __init__(self) -> None:
        self.asked: list[tuple[str, OpaQuery]] = []
        self.fail = False

    def __call__(self, decision: str, query: OpaQuery) -> object:
        if self.fail:
            raise RuntimeError("mongo down")
        self.asked.append((decision, query))
        return [0]


@pytest.fixture
def served() -> Iterator[tuple[str, _Decide]]:
    decide = _Decide()
    server = DecisionServer(decide, SecretStr(KEY), "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{server.port}", decide
    finally:
        server.close()


def _post(url: str, body: bytes) -> tuple[int, str, dict[str, object]]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310 - loopback test server
            return resp.status, resp.headers["Content-Type"], json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], json.loads(exc.read())


def test_a_decision_is_answered_with_its_result(served: tuple[str, _Decide]) -> None:
    base, decide = served
    status, kind, body = _post(f"{base}/v1/opa/lake/{KEY}/batch", json.dumps(REQUEST).encode())
    assert (status, kind, body) == (200, "application/json", {"result": [0]})
    decision, query = decide.asked[0]
    schema = query.input.action.filterResources[0].schema_  # type: ignore[index]
    assert decision == "batch" and schema is not None and schema.schemaName == "acme_x"


def test_a_wrong_key_is_refused_before_the_body_is_read(served: tuple[str, _Decide]) -> None:
    base, decide = served
    for key in ("wrong", KEY + "x", KEY[:-1]):
        status, kind, body = _post(f"{base}/v1/opa/lake/{key}/allow", json.dumps(REQUEST).encode())
        assert (status, kind) == (401, "application/problem+json")
        assert KEY not in json.dumps(body)
    assert decide.asked == []


def test_bad_requests_name_the_field_and_unknown_paths_are_404(served: tuple[str, _Decide]) -> None:
    base, _ = served
    status, _, body = _post(f"{base}/v1/opa/lake/{KEY}/allow", b'{"input": {"context": {}}}')
    assert status == 400 and "input/context/identity" in str(body["detail"])
    assert _post(f"{base}/v1/opa/lake/{KEY}/row-filters", json.dumps(REQUEST).encode())[0] == 404
    assert _post(f"{base}/v1/opa/{KEY}/allow", json.dumps(REQUEST).encode())[0] == 404


def test_a_failing_decision_is_a_503_and_nothing_of_the_request_is_logged(
    served: tuple[str, _Decide], caplog: pytest.LogCaptureFixture
) -> None:
    base, decide = served
    decide.fail = True
    with caplog.at_level(logging.DEBUG):
        status, _, body = _post(f"{base}/v1/opa/lake/{KEY}/allow", json.dumps(REQUEST).encode())
    assert status == 503 and body["title"] == "decision-unavailable"
    assert KEY not in caplog.text and "acme" not in caplog.text
