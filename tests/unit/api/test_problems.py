from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.problems import install_problem_handlers
from metalake.sealing import SealingError


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


def test_a_secret_that_cannot_be_sealed_or_opened_is_a_503_that_names_no_object() -> None:
    app = FastAPI()
    install_problem_handlers(app)

    @app.get("/connectors/pg")
    def unsealable() -> None:
        raise SealingError("connector_secrets/acme/pg field config.password is not sealed")

    response = TestClient(app, raise_server_exceptions=False).get("/connectors/pg")
    assert response.status_code == 503 and response.headers["content-type"] == "application/problem+json"
    assert response.json()["type"] == "/problems/secrets-unavailable"
    # The reason is the operator's (the log): the caller learns the class of failure only.
    assert "config.password" not in response.text and "acme" not in response.text
