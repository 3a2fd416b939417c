"""Partition keys: escaped so two partitions never share a key, unchanged for names without '%', '&' or '='."""

from __future__ import annotations

import pytest

from control.connectors.plugin import (
    FORGET,
    KEEP,
    InvalidPartitionKey,
    SourceRecord,
    parse_partition_key,
    partition_key,
)
from metalake.events import new_event

PARTITIONS = [
    {},
    {"table": "a"},
    {"database": "shop", "schema": "public", "table": "orders"},
    {"database": "a&schema=b"},
    {"database": "a", "schema": "b"},
    {"database": "50%", "schema": "x=y", "table": "p&q%26"},
    {"k&=%": "v&=%", "z": ""},
    {"database": "naïve café", "schema": "sp ace"},
]


@pytest.mark.parametrize("partition", PARTITIONS)
def test_round_trip(partition: dict[str, str]) -> None:
    assert parse_partition_key(partition_key(partition)) == partition


def test_keys_are_distinct_where_the_unescaped_ones_collided() -> None:
    keys = [partition_key(p) for p in PARTITIONS]
    assert len(set(keys)) == len(keys)
    # Before escaping both of these were "database=a&schema=b".
    assert partition_key({"database": "a&schema=b"}) == "database=a%26schema%3Db"
    assert partition_key({"database": "a", "schema": "b"}) == "database=a&schema=b"


def test_keys_without_the_three_characters_are_what_they_were() -> None:
    # The stored offsets of every partition whose names hold no '%', '&' or '=' keep their keys byte for byte.
    partition = {"database": "shop", "schema": "sp ace/ü", "table": "t-1.x"}
    legacy = "&".join(f"{k}={partition[k]}" for k in sorted(partition))
    assert partition_key(partition) == legacy


@pytest.mark.parametrize("key", ["table", "a=b=c", "a=b&&c=d"])
def test_strings_that_are_not_keys_are_refused(key: str) -> None:
    with pytest.raises(InvalidPartitionKey):
        parse_partition_key(key)


def test_offset_actions_are_explicit() -> None:
    event = new_event("io.metalake.asset.deleted.v1", "acme", {"urn": "urn:metalake:t:i/a", "version": 1}, source="/t")
    assert SourceRecord(event, {"t": "a"}).offset is KEEP and not SourceRecord(event, {"t": "a"}).forgets
    assert SourceRecord(event, {"t": "a"}, FORGET).forgets
    assert SourceRecord(event, {"t": "a"}, None).forgets  # the meaning None had before the two were told apart
    assert not SourceRecord(event, {"t": "a"}, {"version": 1}).forgets
