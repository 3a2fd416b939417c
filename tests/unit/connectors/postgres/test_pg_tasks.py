"""The crawler's split into tasks and partition ownership, on the fake catalog (see conftest.py).

Tasks are run the way the runtime runs them: ``task_configs`` over every stored offset, then each task polls with
the offsets of the partitions it owns (``owned_offsets``); offsets are stored back as the runtime stores them.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from connectors.postgres import PostgresCatalogConfig, PostgresCatalogConnector
from connectors.postgres.catalog import SchemaRow
from connectors.postgres.emit import DELETED
from connectors.postgres.tasks import InvalidTaskConfig, Scope, split, stored_units, unit_of
from connectors.runtime.tasks import InvalidTaskConfigs, check_configs, owned_offsets
from control.connectors.plugin import ConnectorContext, SourceRecord, partition_key

CONFIG = PostgresCatalogConfig(host="db.internal", user="crawler", password="pw", instance="prod")
SCHEMAS = ("hr", "ops", "sales", "staging")

Offsets = dict[str, Mapping[str, Any]]


# -- the split ------------------------------------------------------------------------------------------------------


def _units(n: int) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for i in range(n):
        out.append((f"db{i // 5}",) if i % 5 == 0 else (f"db{i // 5}", f"s{i % 5}"))
    return out


@pytest.mark.parametrize(("n", "max_tasks"), list(itertools.product([0, 1, 2, 3, 7, 10, 31], [1, 2, 3, 4, 8])))
def test_split_is_complete_disjoint_balanced_and_deterministic(n: int, max_tasks: int) -> None:
    units = _units(n)
    groups = split(units, max_tasks)
    assert len(groups) == max(1, min(max_tasks, n))
    flat = [u for g in groups for u in g]
    assert sorted(flat) == sorted(units)  # complete, and nothing twice: disjoint
    sizes = [len(g) for g in groups]
    assert max(sizes) - min(sizes) <= 1  # balanced
    shuffled = units[:]
    random.Random(n * 31 + max_tasks).shuffle(shuffled)  # noqa: S311 - a reproducible order, not a secret
    assert split(shuffled + units[:2], max_tasks) == groups  # input order and duplicates do not matter


def test_units_of_partitions_and_keys() -> None:
    assert unit_of({"database": "d"}) == ("d",)
    assert unit_of({"database": "d", "schema": "s"}) == ("d", "s")
    assert unit_of({"database": "d", "schema": "s", "table": "t"}) == ("d", "s")
    assert unit_of({"table": "t"}) is None
    keys = [partition_key({"database": "d", "schema": "s&x", "table": "t"}), partition_key({"database": "e"}), "x"]
    assert stored_units(keys) == {("d", "s&x"), ("e",)}


def test_scope_owns_the_partitions_under_its_units() -> None:
    scope = Scope.of({"units": [["shop"], ["shop", "hr"]]})
    assert scope.owns({"database": "shop"})
    assert scope.owns({"database": "shop", "schema": "hr", "table": "t"})
    assert not scope.owns({"database": "shop", "schema": "ops", "table": "t"})
    assert not scope.owns({"database": "other"})
    assert not scope.owns({"table": "t"})
    assert scope.databases() == {"shop"}
    assert Scope.of({}).owns({"anything": "x"}) and Scope.of({}).databases() is None


@pytest.mark.parametrize("config", [{"units": "shop"}, {"units": [["a", "b", "c"]]}, {"units": [[1]]}, {"units": [[]]}])
def test_a_task_config_the_crawler_did_not_write_is_refused(config: dict[str, Any]) -> None:
    with pytest.raises(InvalidTaskConfig):
        Scope.of(config)


def test_the_runtime_refuses_bad_or_overlapping_splits() -> None:
    with pytest.raises(InvalidTaskConfigs):
        check_configs([], 3)
    with pytest.raises(InvalidTaskConfigs):
        check_configs([{}, {}, {}, {}], 3)
    with pytest.raises(InvalidTaskConfigs):
        check_configs([{"x": object()}], 3)
    overlapping = [_task({"units": [["shop"], ["shop", "hr"]]}, 0), _task({"units": [["shop", "hr"]]}, 1)]
    key = partition_key({"database": "shop", "schema": "hr", "table": "t"})
    with pytest.raises(InvalidTaskConfigs):
        owned_offsets({key: {"version": 1}}, overlapping)


# -- tasks over the fake catalog ------------------------------------------------------------------------------------


def _task(config: Mapping[str, Any], task_id: int) -> PostgresCatalogConnector:
    return PostgresCatalogConnector(CONFIG, ConnectorContext("acme", "pg", task_id, dict(config)))


def _store(offsets: Offsets, records: list[SourceRecord]) -> Offsets:
    out = dict(offsets)
    for record in records:
        key = partition_key(record.partition)
        if record.forgets:
            out.pop(key, None)
        elif isinstance(record.offset, Mapping):
            out[key] = record.offset
    return out


def _run(max_tasks: int, offsets: Offsets) -> tuple[list[list[SourceRecord]], Offsets, list[dict[str, Any]]]:
    """One crawl split into tasks: the records of each task, the offsets stored after, the task configs."""
    configs = PostgresCatalogConnector(CONFIG, ConnectorContext("acme", "pg")).task_configs(max_tasks, offsets)
    tasks = [_task(c, i) for i, c in enumerate(configs)]
    owned, unowned = owned_offsets(offsets, tasks)
    assert unowned == 0
    per_task = [list(task.poll(mine)) for task, mine in zip(tasks, owned, strict=True)]
    for task, records in zip(tasks, per_task, strict=True):
        assert all(task.owns(r.partition) for r in records)
    after = offsets
    for records in per_task:
        after = _store(after, records)
    return per_task, after, configs


@pytest.fixture
def shop(catalog: Any) -> Any:
    db = catalog.database("shop")
    db.schemas[:] = [SchemaRow(s, "owner", None) for s in SCHEMAS]
    oid = itertools.count(1)
    for schema in SCHEMAS:
        for t in range(5):
            db.add_table(next(oid), schema, f"t{t}", [("id", "bigint"), ("name", "text")])
    return db


def _tables(records: list[SourceRecord]) -> list[str]:
    return [r.event.data["urn"] for r in records if r.event.data.get("kind") == "table"]


def test_three_tasks_emit_every_table_once_and_match_one_task(shop: Any) -> None:
    single, single_offsets, configs_one = _run(1, {})
    assert configs_one == [{}]
    per_task, offsets, configs = _run(3, {})
    assert len(configs) == 3
    # Units: the database row and four schemas, dealt round robin over the sorted list.
    assert [c["units"] for c in configs] == [
        [["shop"], ["shop", "sales"]],
        [["shop", "hr"], ["shop", "staging"]],
        [["shop", "ops"]],
    ]
    tables = Counter(urn for records in per_task for urn in _tables(records))
    assert len(tables) == 20 and set(tables.values()) == {1}
    assert all(_tables(records) for records in per_task)  # every task had work
    everything = Counter((r.event.type, r.event.data["urn"]) for records in per_task for r in records)
    assert everything == Counter((r.event.type, r.event.data["urn"]) for r in single[0])
    assert offsets.keys() == single_offsets.keys()


def test_a_drop_is_deleted_by_the_owning_task_only(shop: Any) -> None:
    _, offsets, configs = _run(3, {})
    dropped = next(oid for oid, (row, _) in shop.tables.items() if (row.schema, row.name) == ("ops", "t3"))
    del shop.tables[dropped]
    per_task, after, _ = _run(3, offsets)
    owner = next(i for i, c in enumerate(configs) if ["shop", "ops"] in c["units"])
    for i, records in enumerate(per_task):
        if i == owner:
            assert {r.event.type for r in records} == {DELETED}
            assert [r.event.data["urn"].split("/", 2)[-1] for r in records] == ["ops/t3", "ops/t3/id", "ops/t3/name"]
        else:
            assert records == []
    assert len(after) == len(offsets) - 1


def test_a_dropped_schema_keeps_an_owner_through_its_stored_offsets(shop: Any) -> None:
    _, offsets, _ = _run(3, {})
    shop.schemas[:] = [s for s in shop.schemas if s.name != "hr"]
    for oid in [oid for oid, (row, _) in shop.tables.items() if row.schema == "hr"]:
        del shop.tables[oid]
    per_task, after, configs = _run(3, offsets)
    assert any(["shop", "hr"] in c["units"] for c in configs)
    deleting = [i for i, records in enumerate(per_task) if records]
    assert len(deleting) == 1
    assert {r.event.type for r in per_task[deleting[0]]} == {DELETED}
    assert Counter(r.event.data.get("urn", "").count("/") for r in per_task[deleting[0]]) == {4: 10, 3: 5, 2: 1}
    assert not [k for k in after if "schema=hr" in k]
    assert _run(3, after)[0] == [[], [], []]


@pytest.mark.parametrize(("before", "after"), [(3, 2), (2, 3), (3, 1), (1, 3), (4, 3)])
def test_a_resplit_emits_nothing_for_an_unchanged_catalog(shop: Any, before: int, after: int) -> None:
    _, offsets, _ = _run(before, {})
    per_task, stored, configs = _run(after, offsets)
    assert len(configs) == min(after, 5)
    assert per_task == [[] for _ in configs]  # no spurious deletion, no re-emission
    assert stored == offsets


def test_a_resplit_with_a_change_emits_only_the_change(shop: Any) -> None:
    _, offsets, _ = _run(3, {})
    shop.add_table(99, "sales", "t9", [("id", "bigint")])
    per_task, _, _ = _run(2, offsets)
    flat = [r for records in per_task for r in records]
    assert [r.event.type for r in flat if r.event.type == DELETED] == []
    assert [u.split("/", 2)[-1] for u in _tables(flat)] == ["sales/t9"]


def test_a_task_ignores_offsets_it_does_not_own_even_if_handed_them(shop: Any) -> None:
    _, offsets, configs = _run(3, {})
    shop.tables.clear()  # everything dropped: each task must delete only its own share
    deleted: Counter[str] = Counter()
    for i, config in enumerate(configs):
        task = _task(config, i)
        records = list(task.poll(offsets))  # every offset, not only the owned ones
        assert all(task.owns(r.partition) for r in records)
        deleted.update(r.event.data["urn"] for r in records if r.event.type == DELETED)
    assert len(deleted) == 20 * 3 and set(deleted.values()) == {1}  # 20 tables with 2 columns each, once
