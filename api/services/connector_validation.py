"""A connector configuration checked against its plugin's model, and stored once it passes: the admin API's rule,
which turns :class:`InvalidConfig` into a problem+json answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, ValidationError

from control.connectors.plugin import SourceConnector
from control.connectors.records import ConnectorRecord, Tolerance
from control.connectors.registry import ConnectorClass
from control.connectors.schedule import Schedule
from control.connectors.store import ControlStore
from control.connectors.transforms import TransformSpec

MASK = "**********"
# Connect's tasks.max has no upper bound; this one keeps a typo from starting thousands of threads on one worker.
MAX_TASKS = 64


class ConnectorFields(BaseModel):
    """What a connector is configured with, as the admin API accepts it (its route models add their docs)."""

    model_config = ConfigDict(extra="forbid")

    type: str = Field(min_length=1, max_length=64)
    config: dict[str, Any] = Field(default_factory=dict)
    transforms: list[TransformSpec] = Field(default_factory=list)
    errors_tolerance: Tolerance = Tolerance.ALL
    tasks_max: int = Field(
        default=1,
        ge=1,
        le=MAX_TASKS,
        validation_alias=AliasChoices("tasks_max", "tasks.max"),
        description="Connect's tasks.max: at most this many tasks share a source connector's work.",
    )
    schedule: Schedule | None = Field(
        default=None,
        description='A source connector\'s crawl interval, e.g. `{"interval_s": 3600}`; none: crawled on request only.',
    )


class InvalidConfig(ValueError):
    """The configuration breaks a rule; ``field`` is the path at fault (``tasks_max`` or ``config/...``)."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(detail)
        self.field = field
        self.detail = detail


def validate_config(
    cls: ConnectorClass,
    config: Mapping[str, Any],
    stored_secrets: Mapping[str, SecretStr],
    tasks_max: int,
    previous: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, SecretStr]]:
    """The plain config and its secret fields, validated by the plugin's model; a secret field left out or sent
    masked keeps its stored value, unless an endpoint field (``config_model.endpoint_fields``) differs from the
    ``previous`` plain config: then every stored secret field must be sent again."""
    if tasks_max > 1 and not issubclass(cls, SourceConnector):
        raise InvalidConfig("tasks_max", "tasks_max: a webhook connector runs one task")
    values = dict(config)
    kept = [key for key in stored_secrets if values.get(key, MASK) == MASK]
    for key in kept:
        values[key] = stored_secrets[key]
    try:
        model = cls.config_model.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = "/".join(["config", *(str(p) for p in first["loc"])])
        # pydantic's msg names the rule, never the value (which may be a secret).
        raise InvalidConfig(field, f"{field}: {first['msg']}") from None
    secret_values = {k: v for k, v in model if isinstance(v, SecretStr)}
    plain = model.model_dump(mode="json", exclude=set(secret_values))
    moved = next((f for f in cls.config_model.endpoint_fields if previous and previous.get(f) != plain.get(f)), None)
    if moved is not None and kept:
        field = f"config/{sorted(kept)[0]}"
        raise InvalidConfig(field, f"{field}: required again when config/{moved} changes")
    return plain, secret_values


def check_schedule(cls: ConnectorClass, schedule: Schedule | None, min_interval_s: int) -> None:
    """A schedule is for source connectors only (a webhook connector is sent to), and no shorter than the setting."""
    if schedule is None:
        return
    if not issubclass(cls, SourceConnector):
        raise InvalidConfig("schedule", "schedule: only a source connector crawls; a webhook connector is sent to")
    if schedule.interval_s < min_interval_s:
        raise InvalidConfig(
            "schedule/interval_s",
            f"schedule/interval_s: at least {min_interval_s} seconds (connect.schedule_min_interval_s)",
        )


def put_validated(
    store: ControlStore,
    cls: ConnectorClass,
    tenant: str,
    name: str,
    spec: ConnectorFields,
    *,
    min_interval_s: int = 1,
) -> tuple[ConnectorRecord, bool]:
    """Validate ``spec`` (raising :class:`InvalidConfig`), then create or replace the connector; True if created.
    ``min_interval_s``: the shortest schedule interval accepted (``connect.schedule_min_interval_s``)."""
    check_schedule(cls, spec.schedule, min_interval_s)
    current = store.get_connector(tenant, name)
    # Another type is another endpoint altogether: nothing stored for the old one carries over.
    same_type = current is not None and current.type == spec.type
    stored = store.secrets.config(tenant, name) if same_type else {}
    previous = current.config if current is not None and same_type else None
    plain, secret_values = validate_config(cls, spec.config, stored, spec.tasks_max, previous)
    return store.put_connector(
        tenant,
        name,
        spec.type,
        plain,
        config_secrets=secret_values,
        transforms=spec.transforms,
        errors_tolerance=spec.errors_tolerance,
        tasks_max=spec.tasks_max,
        schedule=spec.schedule,
    )
