"""problem+json rendering, the body-limit reader, and the worker's admin-token rules."""

from __future__ import annotations

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from pydantic import BaseModel, SecretStr
from runtime_fakes import ADMIN_TOKEN, World

from connectors.runtime.bodies import read_limited
from connectors.runtime.worker import WorkerConfigError, check_admin_token
from metalake.http.problems import MEDIA_TYPE, Problem, install_problem_handlers
from metalake.settings import Settings


class Item(BaseModel):
    name: str


def _app() -> FastAPI:
    app = FastAPI()
    install_problem_handlers(app)

    @app.post("/limited")
    async def limited(request: Request) -> dict[str, int]:
        return {"size": len(await read_limited(request, 10))}

    @app.post("/items")
    def items(item: Item) -> dict[str, str]:
        return {"name": item.name}

    @app.get("/teapot")
    def teapot() -> None:
        raise Problem(418, "teapot", "short and stout", field="spout", headers={"Retry-After": "5"})

    return app


client = TestClient(_app())


def test_problem_carries_type_title_status_detail_field() -> None:
    response = client.get("/teapot")
    assert response.status_code == 418
    assert response.headers["content-type"] == MEDIA_TYPE
    assert response.headers["retry-after"] == "5"
    assert response.json() == {
        "type": "/problems/teapot",
        "title": "I'm a Teapot",
        "status": 418,
        "detail": "short and stout",
        "instance": "/teapot",
        "field": "spout",
    }


def test_validation_errors_name_the_field_not_the_value() -> None:
    response = client.post("/items", json={"name": {"card": "4111-1111"}})
    assert response.status_code == 422
    body = response.json()
    assert body["field"] == "name"
    assert "4111" not in response.text


def test_unknown_route_is_a_problem() -> None:
    response = client.get("/nowhere")
    assert response.status_code == 404 and response.headers["content-type"] == MEDIA_TYPE


def test_body_limit_counts_the_bytes_read() -> None:
    assert client.post("/limited", content=b"x" * 10).json() == {"size": 10}
    assert client.post("/limited", content=b"x" * 11).status_code == 413

    def chunked() -> object:
        yield b"x" * 6
        yield b"x" * 6

    response = client.post("/limited", content=chunked())  # type: ignore[arg-type]
    assert response.status_code == 413 and response.json()["field"] == "body"


# -- admin token ------------------------------------------------------------------------------------------------------


def test_the_worker_refuses_to_start_without_a_strong_token() -> None:
    settings = Settings()
    settings.connect.admin_token = None
    with pytest.raises(WorkerConfigError):
        check_admin_token(settings)
    settings.connect.admin_token = SecretStr("changeme")
    with pytest.raises(WorkerConfigError):
        check_admin_token(settings)
    settings.connect.dev_mode = True
    check_admin_token(settings)


@pytest.mark.parametrize("auth", [None, "Bearer wrong", f"Basic {ADMIN_TOKEN}"])
def test_management_needs_the_admin_token(world: World, auth: str | None) -> None:
    from connectors.runtime.worker import create_app

    with TestClient(create_app(world.settings, runtime=world.runtime)) as test_client:
        response = test_client.get("/connectors", headers={"Authorization": auth} if auth else {})
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        ok = test_client.get("/connectors", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert ok.status_code == 200 and ok.json() == []
        assert test_client.get("/healthz").json() == {"status": "ok"}


def test_dev_mode_without_token_disables_management(world: World) -> None:
    from connectors.runtime.worker import create_app

    world.settings.connect.admin_token = None
    world.settings.connect.dev_mode = True
    with TestClient(create_app(world.settings, runtime=world.runtime)) as test_client:
        assert test_client.get("/connectors").status_code == 503
