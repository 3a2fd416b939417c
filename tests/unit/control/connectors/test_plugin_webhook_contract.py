"""The webhook plugin contract's defaults: a plugin that only verifies, reads and maps is keyed by its parsed
content, so spellings of one body are one delivery and any change of content is another."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from control.connectors.plugin import ConnectorConfig, ConnectorContext, InboundRequest, WebhookConnector, parsed_key
from metalake.events import CloudEvent


class _Minimal(WebhookConnector[ConnectorConfig, Any]):
    config_model = ConnectorConfig

    def verify(self, request: InboundRequest, secrets: Sequence[bytes]) -> None:
        pass

    def read(self, request: InboundRequest) -> Any:
        return request.parsed.value

    def to_events(self, payload: Any, request: InboundRequest) -> Sequence[CloudEvent]:
        return []


def _key(body: bytes) -> str:
    plugin = _Minimal(ConnectorConfig(), ConnectorContext("acme", "hook"))
    request = InboundRequest({}, body, datetime(2026, 1, 1, tzinfo=UTC))
    return plugin.dedup_key(plugin.read(request), request)


VALUE = {"b": [1, 2.5, None], "a": "caf\u00e9", "c": {"y": True, "x": "\ud800"}}


@pytest.mark.parametrize(
    "spelling",
    [
        json.dumps(VALUE, indent=4).encode(),
        json.dumps(VALUE, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"),
        json.dumps(dict(reversed(VALUE.items()))).encode(),
        b"\n " + json.dumps(VALUE).replace('"a"', '"\\u0061"').encode() + b"\r\n",
    ],
)
def test_the_default_key_is_the_parsed_content_whatever_the_spelling(spelling: bytes) -> None:
    assert _key(spelling) == _key(json.dumps(VALUE).encode())


def test_the_default_key_changes_with_the_content_and_is_parsed_key() -> None:
    body = json.dumps(VALUE).encode()
    assert _key(json.dumps({**VALUE, "a": "cafe"}).encode()) != _key(body)
    assert _key(body) == parsed_key(InboundRequest({}, body, datetime(2026, 1, 1, tzinfo=UTC)))
    assert _key(body).startswith("p:")


def test_read_and_to_events_are_the_steps_a_plugin_must_write() -> None:
    assert WebhookConnector.__abstractmethods__ == frozenset({"verify", "read", "to_events"})
