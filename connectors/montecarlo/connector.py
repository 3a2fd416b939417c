"""The Monte Carlo webhook connector: signed incident deliveries in, one incident event per affected table out.

Pure: no I/O. The runtime calls :meth:`MonteCarloConnector.verify` on the request first, then
:meth:`MonteCarloConnector.read` (the body, as the request parsed it once, validated into a
:class:`~connectors.montecarlo.payloads.Delivery`), then :meth:`MonteCarloConnector.dedup_key` and
:meth:`MonteCarloConnector.to_events` of what ``read`` returned. The signature is checked over the parsed body and
over the raw bytes. See docs/connectors/montecarlo.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from connectors.montecarlo import incidents
from connectors.montecarlo.config import MonteCarloConfig
from connectors.montecarlo.mapping import affected_tables
from connectors.montecarlo.payloads import Delivery, read_delivery
from connectors.montecarlo.signature import header_value, verify_signature
from control.connectors.plugin import InboundRequest, InvalidPayload, WebhookConnector
from metalake.events import CloudEvent, new_event
from metalake.events.validation import InvalidData


class MonteCarloConnector(WebhookConnector[MonteCarloConfig, Delivery]):
    """Monte Carlo incident webhooks (``x-mcd-signature``, HMAC-SHA512) -> ``com.montecarlodata.incident.*.v1``.

    Raises :class:`~control.connectors.plugin.AuthenticationFailed` (401),
    :class:`~connectors.montecarlo.signature.BodyNotJson` (400, unauthenticated: not dead-lettered) from ``verify``,
    and :class:`~control.connectors.plugin.InvalidPayload` (verified but unmappable: dead-lettered) from ``read``
    and ``to_events``.
    """

    config_model = MonteCarloConfig

    def verify(self, request: InboundRequest, secrets: Sequence[bytes]) -> None:
        verify_signature(request.body, request.parsed, header_value(request.headers), secrets)

    def read(self, request: InboundRequest) -> Delivery:
        """The body as a JSON object and its envelope; :class:`~control.connectors.plugin.InvalidPayload` naming the
        location of a value of the wrong shape."""
        return read_delivery(request.parsed)

    def to_events(self, payload: Delivery, request: InboundRequest) -> Sequence[CloudEvent]:
        envelope = payload.envelope
        incidents.required_incident_id(envelope)  # before the tables, so the error names the more basic fault
        tables = affected_tables(envelope, self.config)
        status = incidents.status_of(envelope)
        key = incidents.dedup_key(payload.raw, envelope)
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

    def dedup_key(self, payload: Delivery, request: InboundRequest) -> str:
        """Hex sha256 of the incident's content (:func:`~connectors.montecarlo.incidents.dedup_key`): equal for a
        redelivery of the same content, however it is spelled."""
        return incidents.dedup_key(payload.raw, payload.envelope)
