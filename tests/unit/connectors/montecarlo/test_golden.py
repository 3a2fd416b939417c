"""Golden files: each Monte Carlo delivery in fixtures/ against the events (or error) recorded in golden/.

See conftest.py for how to rewrite the golden files (``METALAKE_UPDATE_GOLDEN=1``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from connectors.montecarlo import MonteCarloConnector
from control.connectors.plugin import InboundRequest, InvalidPayload
from metalake.events import decode_record

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
GOLDEN = HERE / "golden"
UPDATE = os.environ.get("METALAKE_UPDATE_GOLDEN") == "1"
NAMES = sorted(path.stem for path in FIXTURES.glob("*.json"))


def _outcome(connector: MonteCarloConnector, request: InboundRequest) -> dict[str, Any]:
    try:
        events = connector.to_events(connector.read(request), request)
    except InvalidPayload as exc:
        return {"error": {"class": type(exc).__name__, "field": exc.field, "message": str(exc)}}
    for event in events:  # every event must also be a valid Kafka record, as the enrichment job will read it
        assert decode_record(event.key, event.value(), event.headers()) == event
    return {
        "events": [
            {"id": e.id, "type": e.type, "subject": e.subject, "key": e.key.decode(), "data": e.data} for e in events
        ]
    }


@pytest.mark.parametrize("name", NAMES)
def test_golden(
    name: str,
    connector: MonteCarloConnector,
    request_for: Callable[..., InboundRequest],
    fixture_body: Callable[[str], bytes],
) -> None:
    actual = _outcome(connector, request_for(fixture_body(name)))
    path = GOLDEN / f"{name}.json"
    if UPDATE:
        path.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n", "utf-8")
    assert path.exists(), f"no golden file for fixtures/{name}.json: run with METALAKE_UPDATE_GOLDEN=1 and review it"
    assert actual == json.loads(path.read_text("utf-8"))


def test_no_orphan_golden_files() -> None:
    assert sorted(path.stem for path in GOLDEN.glob("*.json")) == NAMES


def test_the_fixtures_cover_the_three_statuses_and_errors() -> None:
    # Guards the golden set itself: a rewrite that turned every case into an error would otherwise pass.
    seen: set[str] = set()
    for name in NAMES:
        outcome = json.loads((GOLDEN / f"{name}.json").read_text("utf-8"))
        seen.update(e["data"]["status"] for e in outcome.get("events", []))
        if "error" in outcome:
            seen.add("error")
    assert seen == {"opened", "updated", "resolved", "error"}
