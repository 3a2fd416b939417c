"""Connector bodies: a connector's configuration (create, replace), the connector as shown (secrets masked), its
Connect-shaped status and tasks, signing secrets, source offsets and the installed plugin types."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic.config import JsonDict

from api.services.connector_validation import ConnectorFields

NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"

_MC_CONFIG: JsonDict = {"default_platform": "snowflake", "default_instance": "acme"}


class ConnectorSpec(ConnectorFields):
    """A connector's configuration. ``config`` must satisfy the type's JSON Schema
    (``GET /v1/connector-plugins/{type}/schema``); secret fields may be sent as ``**********`` to keep them."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"example": {"type": "montecarlo", "config": _MC_CONFIG}}
    )


class ConnectorCreate(ConnectorSpec):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"example": {"name": "monte-carlo", "type": "montecarlo", "config": _MC_CONFIG}},
    )

    name: str = Field(pattern=NAME_PATTERN)


class SecretInfoView(BaseModel):
    id: str
    created_at: datetime
    expires_at: datetime | None = Field(
        default=None, description="The end of a previous secret's overlap: it verifies nothing after this."
    )


class ConnectorView(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "tenant": "acme",
                "name": "monte-carlo",
                "type": "montecarlo",
                "kind": "webhook",
                "config": _MC_CONFIG,
                "transforms": [],
                "errors_tolerance": "all",
                "tasks_max": 1,
                "state": "RUNNING",
                "webhook_secrets": [{"id": "9f86d081", "created_at": "2026-11-22T03:00:00Z"}],
            }
        }
    )

    tenant: str
    name: str
    type: str
    kind: str | None = Field(description="webhook or source")
    config: dict[str, Any] = Field(description="Secret fields are masked as `**********`.")
    transforms: list[dict[str, Any]]
    errors_tolerance: str
    tasks_max: int
    schedule: dict[str, Any] | None = Field(default=None, description="The crawl interval of a scheduled source.")
    state: str
    webhook_secrets: list[SecretInfoView] = Field(description="Active signing secrets, newest first: ids only.")


class ConnectorStateView(BaseModel):
    state: str = Field(description="RUNNING | PAUSED | FAILED")
    error: str | None = None
    updated_at: datetime | None = None


class TaskStatusView(BaseModel):
    id: int
    state: str = Field(description="RUNNING | PAUSED | FAILED (a paused connector's tasks show PAUSED)")
    worker_id: str | None = Field(default=None, description="Who ran the task last (source connectors).")
    trace: str | None = Field(default=None, description="Why the task FAILED.")
    last_run: dict[str, Any] | None = None
    updated_at: datetime | None = None


class ScheduleStatusView(BaseModel):
    """A scheduled connector's runs (docs/connectors/runtime.md#scheduled-crawls)."""

    interval_s: int
    last_started_at: datetime | None = Field(default=None, description="None: not run on its schedule yet.")
    next_run_at: datetime | None = Field(
        default=None, description="The last start plus the interval; None: at a worker's next look."
    )
    last_finished_at: datetime | None = None
    last_outcome: str | None = Field(default=None, description="done | failed | unavailable | refused | error")
    last_records: int | None = Field(default=None, description="Events Kafka confirmed in the last scheduled run.")
    last_error: str | None = None


class StatusView(BaseModel):
    """Shaped like Kafka Connect's status: the connector and its tasks (source connectors, after a first crawl)."""

    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "name": "warehouse",
                "type": "source",
                "connector": {"state": "RUNNING", "error": None},
                "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "host:4242"}],
            }
        }
    )

    name: str
    type: str | None = Field(description="webhook or source")
    connector: ConnectorStateView
    tasks: list[TaskStatusView]
    schedule: ScheduleStatusView | None = Field(default=None, description="Only for a connector with a schedule.")


class TaskConfigView(BaseModel):
    id: int
    config: dict[str, Any] = Field(description="What the connector's split gave the task (the crawler: its units).")


class TasksView(BaseModel):
    tasks: list[TaskConfigView] = Field(description="The tasks of the last split, by id (none before a first crawl).")


class SecretCreate(BaseModel):
    """A webhook signing secret to activate; omitted: one is generated and shown once in the answer."""

    model_config = ConfigDict(extra="forbid")

    secret: SecretStr | None = Field(default=None, min_length=16, max_length=512)
    overlap_seconds: int | None = Field(
        default=None,
        ge=0,
        le=30 * 86_400,
        description="How long the previous secret still verifies (default connect.webhook_secret_overlap_s, 24 h; "
        "0 retires it now).",
    )


class SecretsView(BaseModel):
    id: str | None = Field(default=None, description="The secret just activated.")
    active: list[SecretInfoView]
    secret: str | None = Field(default=None, description="Only when generated, only in this answer.")


class PluginView(BaseModel):
    name: str
    kind: str | None = Field(description="webhook or source; null when the plugin is disabled")
    disabled_reason: str | None = None


class PluginSchemaView(BaseModel):
    name: str
    config_schema: dict[str, Any]


class OffsetView(BaseModel):
    partition: str
    offset: dict[str, Any]


class OffsetsView(BaseModel):
    offsets: list[OffsetView]


class OffsetsReset(BaseModel):
    reset: list[str] = Field(description="Partitions whose offsets were forgotten.")
