"""The Monte Carlo webhook connector: signed incident deliveries in, one incident event per affected table out.

Pure: no I/O. The runtime calls :meth:`MonteCarloConnector.verify` on the request first, then
:meth:`MonteCarloConnector.to_events`; it may call :meth:`MonteCarloConnector.dedup_key` (after ``verify``) to drop a
delivery it has already published. All three read the body as the request parsed it once (``request.parsed``); the
signature is checked over that and over the raw bytes. See docs/connectors/montecarlo.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from connectors.montecarlo import incidents
from connectors.montecarlo.config import MonteCarloConfig
from connectors.montecarlo.mapping import affected_tables
from connectors.montecarlo.payloads import Envelope, json_object, parse_envelope
from connectors.montecarlo.signature import header_value, verify_signature
from control.connectors.plugin import ConnectorContext, InboundRequest, InvalidPayload, WebhookConnector
from metalake.events import CloudEvent, new_event
from metalake.events.validation import InvalidData


class MonteCarloConnector(WebhookConnector[MonteCarloConfig]):
    """Monte Carlo incident webhooks (``x-mcd-signature``, HMAC-SHA512) -> ``com.montecarlodata.incident.*.v1``.

    Raises :class:`~control.connectors.plugin.AuthenticationFailed` (401),
    :class:`~connectors.montecarlo.signature.BodyNotJson` (400, unauthenticated: not dead-lettered) from ``verify``,
    and :class:`~control.connectors.plugin.InvalidPayload` (verified but unmappable: dead-lettered) from
    ``to_events``.
    """

    config_model = MonteCarloConfig

    def __init__(self, config: MonteCarloConfig, ctx: ConnectorContext) -> None:
        super().__init__(config, ctx)
        self._read: tuple[InboundRequest, dict[str, Any], Envelope] | None = None

    def _delivery(self, request: InboundRequest) -> tuple[dict[str, Any], Envelope]:
        """The body as an object and its envelope, validated once per request: the runtime asks for the dedup key
        and then for the events of the same request (an instance serves one delivery: the runtime builds one each)."""
        if self._read is None or self._read[0] is not request:
            raw = json_object(request.parsed)
            self._read = (request, raw, parse_envelope(raw))
        return self._read[1], self._read[2]

    def verify(self, request: InboundRequest, secrets: Sequence[bytes]) -> None:
        verify_signature(request.body, request.parsed, header_value(request.headers), secrets)

    def to_events(self, request: InboundRequest) -> Sequence[CloudEvent]:
        raw, envelope = self._delivery(request)
        incidents.required_incident_id(envelope)  # before the tables, so the error names the more basic fault
        tables = affected_tables(envelope, self.config)
        status = incidents.status_of(envelope)
        key = incidents.dedup_key(raw, envelope)
        version = incidents.version_ms(request.received_at)
        events: list[CloudEvent] = []
        for table in tables:
            data = incidents.incident_data(envelope, table, status, version)
            try:
                event = new_event(
                    incidents.event_type(status),
                    self.ctx.tenant_id,
                    data,
                    source=self.ctx.source,
                    event_id=incidents.event_id(key, table.urn),
                    time=incidents.aware(request.received_at),
                )
            except InvalidData as exc:  # e.g. an owner longer than the schema allows: the sender's fault, DLQ it
                raise InvalidPayload(f"the incident event's {exc}", f"data/{exc.field}") from None
            events.append(event)
        return events

    def dedup_key(self, request: InboundRequest) -> str:
        """Hex sha256 of the delivery's content: equal for a redelivery of the same content. Call after ``verify``;
        raises :class:`~control.connectors.plugin.InvalidPayload` if the body cannot be parsed."""
        return incidents.dedup_key(*self._delivery(request))
