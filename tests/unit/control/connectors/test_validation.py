"""The config rule and the task-status rule of the control plane, which the admin API applies and shows."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from api.services.connector_status import task_state
from api.services.connector_validation import MASK, InvalidConfig, validate_config
from connectors.montecarlo.connector import MonteCarloConnector
from connectors.postgres.connector import PostgresCatalogConnector
from control.connectors.records import ConnectorRecord, ConnectorState, TaskRecord

PG = {"host": "db", "user": "crawler", "instance": "shop"}


def test_a_masked_or_missing_secret_keeps_the_stored_one_and_secrets_come_back_apart() -> None:
    stored = {"password": SecretStr("s3cret-stored")}
    for config in (PG, {**PG, "password": MASK}):
        plain, secrets = validate_config(PostgresCatalogConnector, config, stored, 2)
        assert secrets["password"].get_secret_value() == "s3cret-stored"
        assert "password" not in plain and plain["host"] == "db"
    _, secrets = validate_config(PostgresCatalogConnector, {**PG, "password": "new-one"}, stored, 1)
    assert secrets["password"].get_secret_value() == "new-one"


def test_the_field_at_fault_is_named_and_the_value_never_quoted() -> None:
    with pytest.raises(InvalidConfig) as caught:
        validate_config(PostgresCatalogConnector, {**PG, "port": "not-a-port-s3cret"}, {}, 1)
    assert caught.value.field == "config/port"
    assert "s3cret" not in caught.value.detail
    with pytest.raises(InvalidConfig) as caught:
        validate_config(MonteCarloConnector, {"default_platform": "snowflake", "default_instance": "a"}, {}, 2)
    assert caught.value.field == "tasks_max"


@pytest.mark.parametrize("config", [PG, {**PG, "password": ""}])
def test_a_postgres_connector_without_a_password_is_refused_naming_the_field(config: dict[str, str]) -> None:
    # Passwordless authentication (trust, peer, .pgpass) would crawl with the worker's own network identity.
    with pytest.raises(InvalidConfig) as caught:
        validate_config(PostgresCatalogConnector, config, {}, 1)
    assert caught.value.field == "config/password"
    with pytest.raises(InvalidConfig) as caught:  # and on update: an empty password does not replace the stored one
        validate_config(PostgresCatalogConnector, {**PG, "password": ""}, {"password": SecretStr("stored")}, 1)
    assert caught.value.field == "config/password"


@pytest.mark.parametrize("host", ["/var/run/postgresql", "@sock", "a.example.com,b.example.com"])
def test_a_postgres_socket_path_or_host_list_is_refused_naming_the_field(host: str) -> None:
    with pytest.raises(InvalidConfig) as caught:
        validate_config(PostgresCatalogConnector, {**PG, "host": host, "password": "pw"}, {}, 1)
    assert caught.value.field == "config/host"


@pytest.mark.parametrize(
    ("connector", "task", "shown"),
    [
        (ConnectorState.RUNNING, ConnectorState.RUNNING, ConnectorState.RUNNING),
        (ConnectorState.RUNNING, ConnectorState.FAILED, ConnectorState.FAILED),
        (ConnectorState.PAUSED, ConnectorState.RUNNING, ConnectorState.PAUSED),
        (ConnectorState.PAUSED, ConnectorState.FAILED, ConnectorState.FAILED),
    ],
)
def test_pausing_a_connector_pauses_its_tasks_but_a_failed_task_stays_failed(
    connector: ConnectorState, task: ConnectorState, shown: ConnectorState
) -> None:
    record = ConnectorRecord("acme", "pg", "postgres", {}, state=connector)
    assert task_state(record, TaskRecord("acme", "pg", 0, {}, state=task)) is shown


@pytest.mark.parametrize(("field", "value"), [("host", "elsewhere.example"), ("port", 6543), ("sslmode", "disable")])
def test_moving_the_endpoint_requires_the_stored_password_again(field: str, value: object) -> None:
    # The class of attack: a write-only secret kept across a change of endpoint is handed to the new host.
    stored = {"password": SecretStr("s3cret-stored")}
    previous, _ = validate_config(PostgresCatalogConnector, {**PG, "password": "s3cret-stored"}, {}, 1)
    for config in ({**PG, field: value}, {**PG, field: value, "password": MASK}):
        with pytest.raises(InvalidConfig) as caught:
            validate_config(PostgresCatalogConnector, config, stored, 1, previous)
        assert caught.value.field == "config/password"
        assert field in caught.value.detail and "s3cret" not in caught.value.detail
    _, secrets = validate_config(
        PostgresCatalogConnector, {**PG, field: value, "password": "new-one"}, stored, 1, previous
    )
    assert secrets["password"].get_secret_value() == "new-one"
    # The same endpoint keeps the stored password; without a stored one, a password is required anyway (item 9).
    _, kept = validate_config(PostgresCatalogConnector, {**PG, "databases": ["shop"]}, stored, 1, previous)
    assert kept["password"].get_secret_value() == "s3cret-stored"
    with pytest.raises(InvalidConfig) as missing:
        validate_config(PostgresCatalogConnector, {**PG, field: value}, {}, 1, previous)
    assert missing.value.field == "config/password"
