"""problem+json rendering, as the admin API and the connector worker answer errors."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel

from metalake.http.problems import MEDIA_TYPE, Problem, install_problem_handlers


class Item(BaseModel):
    name: str


def _app() -> FastAPI:
    app = FastAPI()
    install_problem_handlers(app)

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
