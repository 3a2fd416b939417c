"""Configuration: defaults, schema selection, and that the password never leaks."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from pydantic import ValidationError

from connectors.postgres import PostgresCatalogConfig
from connectors.postgres.catalog import CatalogError, list_databases

SECRET = "s3cr3t-pw"


def _config(**kw: Any) -> PostgresCatalogConfig:
    return PostgresCatalogConfig(**{"host": "db.internal", "user": "crawler", "instance": "prod", **kw})


def test_defaults() -> None:
    config = _config()
    assert (config.port, config.platform, config.fetch_size, config.databases) == (5432, "postgres", 5000, None)
    for schema in ("pg_catalog", "information_schema", "pg_toast", "pg_toast_temp_1", "pg_temp_3"):
        assert not config.schema_selected(schema)
    assert config.schema_selected("public")
    assert config.schema_selected("pg")


def test_include_then_exclude() -> None:
    config = _config(include_schemas=["sales_*", "hr"], exclude_schemas=["*_tmp"])
    assert [s for s in ("sales_eu", "sales_tmp", "hr", "HR", "public") if config.schema_selected(s)] == [
        "sales_eu",
        "hr",
    ]


@pytest.mark.parametrize(
    "bad", [{"instance": ""}, {"platform": "Postgres"}, {"fetch_size": 0}, {"port": 0}, {"typo": 1}]
)
def test_invalid(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        _config(**bad)


def test_instance_is_required() -> None:
    with pytest.raises(ValidationError):
        PostgresCatalogConfig(host="h", user="u")  # type: ignore[call-arg]


def test_password_is_hidden_from_repr_dump_and_schema() -> None:
    config = _config(password=SECRET)
    assert SECRET not in repr(config)
    assert SECRET not in config.model_dump_json()
    assert SECRET not in str(PostgresCatalogConfig.model_json_schema())
    assert config.connect_kwargs("db")["password"] == SECRET


def test_connection_errors_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(**kwargs: Any) -> None:
        raise psycopg.OperationalError(f"connection failed: host=db.internal password={kwargs['password']} bad")

    monkeypatch.setattr(psycopg, "connect", fail)
    with pytest.raises(CatalogError) as info:
        list_databases(_config(password=SECRET))
    message = str(info.value)
    assert SECRET not in message
    assert "password=***" in message
    assert "db.internal:5432" in message
    assert info.value.__suppress_context__
