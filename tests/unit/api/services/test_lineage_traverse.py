"""The bounded lineage traversal over an in-memory edge list (the same fetch contract as the MongoDB one)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from api.services.lineage import Direction, Edge, EdgeFetch, traverse

# a -> b -> c -> d, b -> e, and a cycle d -> b.
EDGES = [("a", "b"), ("b", "c"), ("c", "d"), ("b", "e"), ("d", "b")]


def fetch_from(edges: list[tuple[str, str]], calls: list[int] | None = None) -> EdgeFetch:
    def fetch(urns: Iterable[str], direction: Direction) -> list[Edge]:
        wanted = set(urns)
        if calls is not None:
            calls.append(len(wanted))
        side = 0 if direction == "downstream" else 1
        return [{"upstream": u, "urn": d} for u, d in edges if (u, d)[side] in wanted]

    return fetch


def test_downstream_by_levels_with_depths() -> None:
    result = traverse("a", "downstream", 2, 100, fetch_from(EDGES))
    assert result.reached == {"b": 1, "c": 2, "e": 2}
    assert [(e["upstream"], e["urn"]) for e in result.edges] == [("a", "b"), ("b", "c"), ("b", "e")]
    assert (result.truncated, result.reason) == (True, "depth 2 reached")  # c -> d lies beyond


def test_upstream_follows_edges_backwards() -> None:
    result = traverse("d", "upstream", 3, 100, fetch_from(EDGES))
    assert result.reached == {"c": 1, "b": 2, "a": 3}
    assert not result.truncated


def test_a_cycle_ends_at_a_node_already_reached_and_keeps_the_closing_edge() -> None:
    result = traverse("b", "downstream", 10, 100, fetch_from(EDGES))
    assert result.reached == {"c": 1, "e": 1, "d": 2}
    assert ("d", "b") in [(e["upstream"], e["urn"]) for e in result.edges]
    assert not result.truncated


def test_the_node_budget_cuts_and_says_so() -> None:
    fan_out = [("hub", f"n{i:03d}") for i in range(50)]
    result = traverse("hub", "downstream", 3, 10, fetch_from(fan_out))
    assert len(result.reached) == 10
    assert (result.truncated, result.reason) == (True, "node budget of 10 reached")
    assert all(e["urn"] in result.reached for e in result.edges)


def test_one_query_per_level() -> None:
    calls: list[int] = []
    traverse("a", "downstream", 2, 100, fetch_from(EDGES, calls))
    assert calls == [1, 1, 2]  # level 1, level 2, and the look beyond the last level


def test_complete_graph_is_not_truncated() -> None:
    result = traverse("c", "downstream", 5, 100, fetch_from([("c", "x")]))
    assert (result.reached, result.truncated) == ({"x": 1}, False)


@pytest.mark.parametrize("depth", [0, 11])
def test_depth_is_bounded(depth: int) -> None:
    with pytest.raises(ValueError, match="depth"):
        traverse("a", "downstream", depth, 10, fetch_from(EDGES))
