"""A tenant's propagation state: what a change affects, what a recompute adds and removes, and the versions."""

from __future__ import annotations

from typing import Any

from catalog.propagation.diff import PROPAGATED_TYPE, UNPROPAGATED_TYPE, event_id
from catalog.propagation.graph import Limits
from catalog.propagation.tenant import TenantPropagation


def u(name: str) -> str:
    return f"urn:metalake:pg:prod/db/s/t/{name}"


def tag(urn: str, version: int, tag_name: str = "PII", deleted: bool = False, **flags: Any) -> dict[str, Any]:
    return {"urn": urn, "tag": tag_name, "version": version, "event_id": f"e{version}", "deleted": deleted, **flags}


def edge(a: str, b: str, version: int, deleted: bool = False, **extra: Any) -> dict[str, Any]:
    return {"upstream": a, "urn": b, "version": version, "event_id": f"l{version}", "deleted": deleted, **extra}


def asset(urn: str, version: int, deleted: bool) -> dict[str, Any]:
    return {"urn": urn, "version": version, "event_id": f"a{version}", "deleted": deleted}


def state_with(*edges: tuple[str, str]) -> TenantPropagation:
    state = TenantPropagation("acme", Limits())
    for i, (a, b) in enumerate(edges):
        state.apply("lineage_edges", edge(u(a), u(b), i + 1))
    return state


def live(state: TenantPropagation, origin: str = "a", tag_name: str = "PII") -> dict[str, int]:
    rows = state.by_origin.get((u(origin), tag_name), {})
    return {urn.rsplit("/", 1)[1]: row.depth for urn, row in rows.items()}


def run(state: TenantPropagation, table: str, row: dict[str, Any]) -> tuple[set[str], set[str]]:
    added: set[str] = set()
    removed: set[str] = set()
    for origin in sorted(state.apply(table, row)):
        plan = state.plan(origin)
        added |= {r.urn.rsplit("/", 1)[1] for r in plan.added}
        removed |= {r.urn.rsplit("/", 1)[1] for r in plan.removed}
    return added, removed


def test_tag_added_then_removed_then_added_again() -> None:
    state = state_with(("a", "b"), ("b", "c"))
    assert run(state, "classifications", tag(u("a"), 100)) == ({"b", "c"}, set())
    assert live(state) == {"b": 1, "c": 2}
    assert run(state, "classifications", tag(u("a"), 101, deleted=True)) == (set(), {"b", "c"})
    assert live(state) == {}
    assert run(state, "classifications", tag(u("a"), 102)) == ({"b", "c"}, set())
    row = state.rows[(u("c"), "PII", u("a"))]
    # The re-add is newer than the tombstone before it, whatever the assignment's own version.
    assert row.stamp == (102, event_id("acme", PROPAGATED_TYPE, row.key, 102))
    assert row.path == (u("a"), u("b"), u("c"))


def test_versions_stay_ordered_when_the_assignment_version_does_not_move() -> None:
    state = state_with(("a", "b"))
    run(state, "classifications", tag(u("a"), 5))
    run(state, "lineage_edges", edge(u("a"), u("b"), 50, deleted=True))
    tombstone = state.rows[(u("b"), "PII", u("a"))]
    assert tombstone.deleted and tombstone.stamp[0] == 6
    assert tombstone.stamp[1] == event_id("acme", UNPROPAGATED_TYPE, tombstone.key, 6)
    run(state, "lineage_edges", edge(u("a"), u("b"), 51))
    assert state.rows[(u("b"), "PII", u("a"))].stamp[0] == 7


def test_a_stale_or_repeated_change_does_nothing() -> None:
    state = state_with(("a", "b"))
    assert run(state, "classifications", tag(u("a"), 10)) == ({"b"}, set())
    assert state.apply("classifications", tag(u("a"), 10)) == set()
    assert state.apply("classifications", tag(u("a"), 9, deleted=True)) == set()
    assert state.apply("lineage_edges", edge(u("a"), u("b"), 1, deleted=True)) == set()
    assert live(state) == {"b": 1}


def test_propagate_false_and_restricted_lineage_reach_nothing() -> None:
    state = state_with(("a", "b"))
    assert run(state, "classifications", tag(u("a"), 1, propagate=False)) == (set(), set())
    assert run(state, "classifications", tag(u("a"), 2)) == ({"b"}, set())
    assert run(state, "classifications", tag(u("a"), 3, restrict_propagation_through_lineage=True)) == (set(), {"b"})
    assert run(state, "classifications", tag(u("a"), 4, propagate=None)) == ({"b"}, set())  # absent means true


def test_a_new_edge_carries_existing_tags_and_a_removed_edge_takes_them_back() -> None:
    state = state_with(("a", "b"))
    run(state, "classifications", tag(u("a"), 1))
    assert run(state, "lineage_edges", edge(u("b"), u("c"), 10)) == ({"c"}, set())
    assert live(state) == {"b": 1, "c": 2}
    assert run(state, "lineage_edges", edge(u("a"), u("b"), 11, deleted=True)) == (set(), {"b", "c"})
    assert live(state) == {}


def test_removing_one_side_of_a_diamond_keeps_the_join_by_the_other_path() -> None:
    state = state_with(("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"))
    run(state, "classifications", tag(u("a"), 1))
    assert state.rows[(u("d"), "PII", u("a"))].path == (u("a"), u("b"), u("d"))
    added, removed = run(state, "lineage_edges", edge(u("a"), u("b"), 10, deleted=True))
    assert (added, removed) == ({"d"}, {"b"})  # d re-published with its new path
    assert state.rows[(u("d"), "PII", u("a"))].path == (u("a"), u("c"), u("d"))


def test_a_blocked_tag_on_an_edge_change_removes_what_is_past_it() -> None:
    state = state_with(("a", "b"), ("b", "c"))
    run(state, "classifications", tag(u("a"), 1))
    assert run(state, "lineage_edges", edge(u("b"), u("c"), 20, blocked_tags=["PII"])) == (set(), {"c"})
    assert run(state, "lineage_edges", edge(u("b"), u("c"), 21, transformation="x", blocked_tags=["PII"])) == (
        set(),
        set(),
    )


def test_two_origins_and_a_direct_tag_keep_separate_rows() -> None:
    state = state_with(("a", "c"), ("b", "c"), ("c", "d"))
    run(state, "classifications", tag(u("a"), 1))
    run(state, "classifications", tag(u("b"), 1))
    run(state, "classifications", tag(u("c"), 1))  # c holds PII directly as well as from a and b
    assert live(state, "a") == {"c": 1, "d": 2}
    assert live(state, "b") == {"c": 1, "d": 2}
    assert live(state, "c") == {"d": 1}
    run(state, "classifications", tag(u("a"), 2, deleted=True))
    assert live(state, "a") == {}
    assert live(state, "b") == {"c": 1, "d": 2}


def test_propagated_tags_never_become_origins() -> None:
    state = state_with(("a", "b"), ("b", "c"))
    echo = {"urn": u("b"), "tag": "PII", "origin": u("x"), "path": [u("x"), u("b")], "version": 1, "event_id": "p"}
    assert state.apply("propagated_tags", {**echo, "deleted": False}) == set()
    assert state.apply("classifications", {**tag(u("b"), 1), "source": "propagated"}) == set()
    assert live(state, "b") == {}


def test_deleting_the_source_keeps_or_removes_its_propagations_as_the_assignment_says() -> None:
    keep = state_with(("a", "b"))
    run(keep, "classifications", tag(u("a"), 1))
    assert run(keep, "assets", asset(u("a"), 5, deleted=True)) == (set(), set())
    assert live(keep) == {"b": 1}

    remove = state_with(("a", "b"))
    run(remove, "classifications", tag(u("a"), 1, remove_propagations_on_entity_delete=True))
    assert run(remove, "assets", asset(u("a"), 5, deleted=True)) == (set(), {"b"})
    assert run(remove, "assets", asset(u("a"), 6, deleted=False)) == ({"b"}, set())


def test_a_deleted_asset_in_the_middle_cuts_the_path() -> None:
    state = state_with(("a", "b"), ("b", "c"))
    run(state, "classifications", tag(u("a"), 1))
    assert run(state, "assets", asset(u("b"), 5, deleted=True)) == (set(), {"b", "c"})
    assert run(state, "assets", asset(u("b"), 6, deleted=False)) == ({"b", "c"}, set())


def test_a_depth_limit_removes_what_is_now_too_deep() -> None:
    state = state_with(("a", "b"), ("b", "c"))
    run(state, "classifications", tag(u("a"), 1))
    state.limits = Limits(max_depth=1)
    plan = state.plan((u("a"), "PII"))
    assert [r.urn for r in plan.removed] == [u("c")]
    assert (plan.truncated, plan.reason, plan.reached) == (True, "max_depth", 1)


def test_a_time_budget_cut_never_removes() -> None:
    state = state_with(("a", "b"), ("b", "c"))
    run(state, "classifications", tag(u("a"), 1))
    state.limits = Limits(time_budget_s=-1.0)
    plan = state.plan((u("a"), "PII"))
    # A one-node walk is too short for the clock check: the budget never cuts it, so nothing changes.
    assert not plan.changed
    assert plan.reason is None


def test_bootstrap_origins_are_the_spreading_assignments_and_the_origins_holding_rows() -> None:
    state = state_with(("a", "b"))
    state.apply("classifications", tag(u("a"), 1))
    state.apply("classifications", tag(u("z"), 1, propagate=False))
    state.apply(
        "propagated_tags",
        {
            "urn": u("q"),
            "tag": "GDPR",
            "origin": u("gone"),
            "path": [u("gone"), u("q")],
            "version": 3,
            "event_id": "x",
            "deleted": False,
        },
    )
    assert state.origins() == {(u("a"), "PII"), (u("gone"), "GDPR")}
    plan = state.plan((u("gone"), "GDPR"))
    assert [r.urn for r in plan.removed] == [u("q")]
    assert plan.removed[0].stamp[0] == 4
