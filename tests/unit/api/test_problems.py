from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.problems import install_problem_handlers


def test_every_error_is_problem_json_and_a_crash_says_nothing_about_its_cause() -> None:
    app = FastAPI()
    install_problem_handlers(app)

    @app.get("/crash")
    def crash() -> None:
        raise RuntimeError("db password is hunter2")

    @app.get("/items/{n}")
    def item(n: int) -> dict[str, int]:
        return {"n": n}

    client = TestClient(app, raise_server_exceptions=False)
    crashed = client.get("/crash")
    assert crashed.status_code == 500 and crashed.headers["content-type"] == "application/problem+json"
    assert "hunter2" not in crashed.text and crashed.json()["type"] == "/problems/internal-error"
    for method, url, status in (("GET", "/nowhere", 404), ("DELETE", "/crash", 405), ("GET", "/items/x", 422)):
        response = client.request(method, url)
        assert response.status_code == status
        assert response.headers["content-type"] == "application/problem+json"
    assert client.get("/items/x").json()["field"] == "n"
