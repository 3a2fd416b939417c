"""Small connector plugins for the runtime's tests, registered by injecting a name -> class mapping (no entry points).

``SignedWebhook`` verifies ``x-test-signature`` (hex HMAC-SHA256 of the body) and maps ``{"delivery": id,
"tables": [{"name", "version"}]}`` to asset upserts; ``ListSource`` crawls a configured list of tables, resuming from
its offsets and deleting the tables that disappeared.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from control.connectors.plugin import (
    AuthenticationFailed,
    ConnectorConfig,
    InboundRequest,
    InvalidPayload,
    SourceConnector,
    SourceRecord,
    WebhookConnector,
    partition_key,
)
from metalake.events import CloudEvent, new_event
from metalake.urn import asset_urn

UPSERTED = "io.metalake.asset.upserted.v1"
DELETED = "io.metalake.asset.deleted.v1"


def sign(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class WebhookConfig(ConnectorConfig):
    instance: str = "wh"


class SignedWebhook(WebhookConnector[WebhookConfig, Any]):
    """Reads the parsed body as it is; keys a delivery by its ``delivery`` field, or, without one, by the default
    (its parsed content)."""

    config_model = WebhookConfig

    def verify(self, request: InboundRequest, secrets: Sequence[bytes]) -> None:
        presented = request.headers.get("x-test-signature")
        if not presented:
            raise AuthenticationFailed("missing x-test-signature")
        if not any(
            hmac.compare_digest(hmac.new(s, request.body, hashlib.sha256).hexdigest(), presented) for s in secrets
        ):
            raise AuthenticationFailed("signature does not match")

    def read(self, request: InboundRequest) -> Any:
        return request.parsed.value

    def dedup_key(self, payload: Any, request: InboundRequest) -> str:
        if isinstance(payload, dict) and "delivery" in payload:
            return str(payload["delivery"])
        return super().dedup_key(payload, request)

    def to_events(self, payload: Any, request: InboundRequest) -> Sequence[CloudEvent]:
        tables = payload.get("tables") if isinstance(payload, dict) else None
        if not isinstance(tables, list):
            raise InvalidPayload("tables must be a list", "tables")
        return [
            new_event(
                UPSERTED,
                self.ctx.tenant_id,
                {
                    "urn": asset_urn("test", self.config.instance, "db", "public", str(t["name"])),
                    "version": t.get("version", 1),
                    "kind": "table",
                    "name": str(t["name"]),
                },
                source=self.ctx.source,
            )
            for t in tables
        ]


class ListSourceConfig(ConnectorConfig):
    tables: list[str]
    version: int = 1
    fail_at: str | None = None


class ListSource(SourceConnector[ListSourceConfig]):
    """One partition per table; offset ``{"version": v}``. Tables whose stored version is current are skipped."""

    config_model = ListSourceConfig

    def _urn(self, table: str) -> str:
        return asset_urn("test", "src", "db", "public", table)

    def poll(self, offsets: Mapping[str, Mapping[str, Any]]) -> Iterator[SourceRecord]:
        wanted = set(self.config.tables)
        for table in self.config.tables:
            if table == self.config.fail_at:
                raise RuntimeError("source unreachable")
            partition = {"table": table}
            if offsets.get(partition_key(partition), {}).get("version") == self.config.version:
                continue
            event = new_event(
                UPSERTED,
                self.ctx.tenant_id,
                {"urn": self._urn(table), "version": self.config.version, "kind": "table", "name": table},
                source=self.ctx.source,
            )
            yield SourceRecord(event, partition, {"version": self.config.version})
        for key in sorted(offsets):
            table = key.removeprefix("table=")
            if table not in wanted:
                event = new_event(
                    DELETED,
                    self.ctx.tenant_id,
                    {"urn": self._urn(table), "version": self.config.version},
                    source=self.ctx.source,
                )
                yield SourceRecord(event, {"table": table}, None)


PLUGINS: dict[str, Any] = {"testhook": SignedWebhook, "listsource": ListSource}
