"""``metalake stack top``'s table: what each cell says for a sample, a missing sample and NaN."""

from __future__ import annotations

from ops.stack.top import QUERIES, Row, render


def test_a_row_per_process_with_missing_and_nan_cells_as_dashes() -> None:
    rows = [
        Row("api", {"up": 1.0, "ready": 1.0}),
        Row("stream", {"up": 1.0, "ready": 0.0, "lag": 12.0, "p50_s": 1.234, "p99_s": float("nan"), "dead_1m": 3.0}),
        Row("outbound", {"up": 0.0}),
    ]
    header, api, stream, outbound = render(rows)
    assert header.split() == ["PROCESS", *(c.upper() for c in QUERIES)]
    assert api.split() == ["api", "yes", "yes", "-", "-", "-", "-"]
    assert stream.split() == ["stream", "yes", "NO", "12", "1.23", "-", "3"]
    assert outbound.split() == ["outbound", "NO", "-", "-", "-", "-", "-"]
