"""A connector worker's dead letter run again through the connector's *current* configuration.

- ``stage=mapping`` from a webhook (``origin=webhook:<path>``): the kept body goes to the plugin's ``to_events``
  with the connector's current config and secrets (e.g. a Monte Carlo warehouse map fixed since), as received at
  the letter's time (the incident's version stays the original delivery's). The signature is not checked again:
  it was checked before the letter was written, and only the worker writes the DLQ topic.
- ``stage=transform``: the kept event is decoded again.

Then, as for a live record, the connector's current transforms and the event check run. The outcome is
all-or-nothing: every event passes (and is published by the caller) or the replay is :class:`Refused` with the
first reason, naming the field (the letter stays, to be replayed once that is fixed too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from control.connectors.chain import RECORD_ERRORS, Chain, Routed, check
from control.connectors.plugin import (
    ConnectorContext,
    InboundRequest,
    InvalidPayload,
    WebhookConnector,
)
from control.connectors.reasons import safe_reason
from control.connectors.registry import Plugin
from control.connectors.store import ConnectorRecord, ConnectorState, ControlStore
from control.deadletters.refusal import Refused
from control.deadletters.topics import StoredLetter
from metalake.events import CloudEvent
from metalake.events.envelope import InvalidEvent, decode_record
from metalake.sealing import SealingError


@dataclass(frozen=True)
class Remapped:
    """What the replay would publish now: the routed events, and how many the transforms dropped."""

    routed: list[Routed]
    dropped: int


def _field_of(exc: BaseException) -> str:
    field = getattr(exc, "field", None)
    if isinstance(field, str) and field:
        return field if field.startswith(("data", "ce_", "subject", "content-type")) else f"data/{field}"
    if isinstance(exc, ValidationError) and exc.errors():
        return "data/" + "/".join(str(p) for p in exc.errors()[0]["loc"])
    return "data"


def _webhook_events(
    stored: StoredLetter, record: ConnectorRecord, store: ControlStore, plugins: Mapping[str, Plugin]
) -> list[CloudEvent]:
    if record.type != stored.letter.plugin:
        raise Refused("the connector is now of another type", "connector", "ConnectorTypeChanged")
    if record.state is not ConnectorState.RUNNING:
        raise Refused(f"the connector is {record.state.value}: activate it first", "connector", "ConnectorNotRunning")
    plugin = plugins.get(record.type)
    if plugin is None or plugin.cls is None or not issubclass(plugin.cls, WebhookConnector):
        raise Refused(f"connector type {record.type!r} is not installed here", "plugin", "PluginUnavailable")
    try:
        _, secrets = store.secrets_of(record.tenant, record.name)
    except SealingError:
        raise Refused("the connector's secrets cannot be opened", "connector", "SecretsUnavailable") from None
    values: dict[str, Any] = {**record.config, **secrets}
    try:
        config = plugin.cls.config_model.model_validate(values)
    except ValidationError as exc:
        raise Refused(f"the connector's stored config is invalid: {safe_reason(exc)}", "connector") from None
    connector = plugin.cls(config, ConnectorContext(record.tenant, record.name))
    headers = {k.lower(): v.decode("utf-8", "replace") for k, v in stored.original_headers}
    request = InboundRequest(headers=headers, body=stored.value or b"", received_at=stored.time)
    if request.parsed.error is not None:
        raise Refused("the kept body is not JSON", "body", "MalformedBody")
    try:
        return list(connector.to_events(request))
    except InvalidPayload as exc:
        raise Refused(safe_reason(exc), exc.field, type(exc).__name__) from None


def remap(stored: StoredLetter, store: ControlStore, plugins: Mapping[str, Plugin]) -> Remapped:
    """The letter's events under the connector's current configuration, or :class:`Refused`."""
    letter = stored.letter
    if letter.tenant_id is None or letter.connector is None:
        raise Refused("the letter names no connector", "connector", "NoConnector")
    record = store.get_connector(letter.tenant_id, letter.connector)
    if record is None:
        raise Refused("the connector no longer exists", "connector", "UnknownConnector")
    if letter.stage == "mapping" and (letter.origin or "").startswith("webhook:"):
        events = _webhook_events(stored, record, store, plugins)
    elif letter.stage == "transform":
        try:
            events = [decode_record(stored.key, stored.value, stored.original_headers)]
        except InvalidEvent as exc:
            raise Refused(exc.reason, exc.field or "data", type(exc).__name__) from None
    else:
        raise Refused(f"letters of stage {letter.stage!r} cannot be replayed", "stage", "NotReplayable")
    chain = Chain.from_specs(record.tenant, record.transforms)
    routed_events: list[Routed] = []
    dropped = 0
    for event in events:
        try:
            routed = chain.run(event)
            if routed is not None:
                routed = replace(routed, event=check(routed.event))
        except RECORD_ERRORS as exc:
            raise Refused(safe_reason(exc), _field_of(exc), type(exc).__name__) from None
        if routed is None:
            dropped += 1
        else:
            routed_events.append(routed)
    return Remapped(routed_events, dropped)
