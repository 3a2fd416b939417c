"""Building ParsedRow values (a Kafka record after parsing) for tests of the streaming job's pure parts."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from processors.enrichment.parse import ParsedRow


def valid_row(event_type: str, version: int, event_id: str, data: dict[str, Any], event_time: datetime) -> ParsedRow:
    """A valid event of tenant ``acme`` whose subject is ``data["urn"]``."""
    return ParsedRow(
        tenant="acme",
        valid=True,
        event_id=event_id,
        event_type=event_type,
        source="/t",
        subject=data.get("urn"),
        event_time=event_time,
        version=version,
        data=json.dumps(data),
        reason=None,
        field=None,
        raw_key=None,
        raw_value=None,
        raw_headers=None,
        topic="t",
        partition=0,
        offset=0,
        kafka_time=None,
        traceparent=None,
    )
