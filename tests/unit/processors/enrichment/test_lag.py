"""The streaming queries' lag: each query's processed offsets (its last progress' Kafka end offsets) against the
partitions' end offsets, one reading per query and partition, labelled by the query's name."""

from __future__ import annotations

import json

from processors.enrichment.lag import lag_readings, processed_offsets

PRIORITY, BULK = "metalake.events.priority", "metalake.events.bulk"


def _progress(offsets: dict[str, dict[str, int]]) -> dict[str, object]:
    # As PySpark 4 hands it out: a source's endOffset is a JSON string.
    return {"sources": [{"description": "KafkaV2", "endOffset": json.dumps(offsets)}]}


def test_processed_offsets_come_from_the_end_offsets_of_the_last_batch() -> None:
    progress = _progress({PRIORITY: {"0": 10, "1": 4}, BULK: {"0": 7}})
    assert processed_offsets(progress) == {(PRIORITY, 0): 10, (PRIORITY, 1): 4, (BULK, 0): 7}
    assert processed_offsets(None) == {} and processed_offsets({"sources": []}) == {}


def test_the_lag_is_the_end_offset_minus_the_processed_offset_per_query_and_partition() -> None:
    asked: list[list[tuple[str, int]]] = []

    def ends(partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        asked.append(partitions)
        return {(PRIORITY, 0): 15, (PRIORITY, 1): 4, (BULK, 0): 107}

    readings = lag_readings(
        [
            ("metalake-dedicated-acme-lake", _progress({PRIORITY: {"0": 10, "1": 4}, BULK: {"0": 7}})),
            ("metalake-dedicated-acme-mongo-priority", _progress({PRIORITY: {"0": 15, "1": 3}})),
            ("metalake-dedicated-acme-mongo-bulk", None),  # no batch yet: nothing to say
        ],
        ends,
    )
    assert len(asked) == 1  # one request for every partition of every query
    # Labelled by the query's role: a dedicated tenant's job names its queries after the tenant.
    assert sorted((labels["group"], labels["topic"], labels["partition"], value) for value, labels in readings) == [
        ("lake", BULK, "0", 100.0),
        ("lake", PRIORITY, "0", 5.0),
        ("lake", PRIORITY, "1", 0.0),
        ("mongo-priority", PRIORITY, "0", 0.0),
        ("mongo-priority", PRIORITY, "1", 1.0),
    ]
