"""The closure of a tag over lineage: direction, blocked tags, diamonds, cycles and the guardrails."""

from __future__ import annotations

import itertools

import pytest

from catalog.propagation.graph import Edge, Limits, LineageGraph, closure


def u(name: str) -> str:
    return f"urn:metalake:pg:prod/db/s/{name}"


def reach(graph: LineageGraph, origin: str, tag: str = "PII", excluded: frozenset[str] = frozenset()) -> dict[str, int]:
    found = closure(graph, u(origin), tag, Limits(), excluded=excluded)
    return {urn.rsplit("/", 1)[1]: r.depth for urn, r in found.reached.items()}


def chain(*names: str, **edge: object) -> list[Edge]:
    return [Edge(u(a), u(b), **edge) for a, b in itertools.pairwise(names)]  # type: ignore[arg-type]


def test_a_tag_flows_downstream_only_by_default() -> None:
    graph = LineageGraph(chain("a", "b", "c"))
    assert reach(graph, "a") == {"b": 1, "c": 2}
    assert reach(graph, "b") == {"c": 1}
    assert reach(graph, "c") == {}


def test_edge_directions() -> None:
    graph = LineageGraph(
        [
            Edge(u("a"), u("up"), "upstream"),  # data a -> up, tags travel up -> a
            Edge(u("a"), u("both"), "both"),
            Edge(u("a"), u("none"), "none"),
        ]
    )
    assert reach(graph, "a") == {"both": 1}
    assert reach(graph, "up") == {"a": 1, "both": 2}
    assert reach(graph, "both") == {"a": 1}
    assert reach(graph, "none") == {}


def test_a_diamond_reaches_the_join_once_by_the_first_shortest_path() -> None:
    graph = LineageGraph([*chain("a", "b", "d", "e"), *chain("a", "c", "d")])
    found = closure(graph, u("a"), "PII")
    assert {k.rsplit("/", 1)[1]: v.depth for k, v in found.reached.items()} == {"b": 1, "c": 1, "d": 2, "e": 3}
    assert found.reached[u("d")].path == (u("a"), u("b"), u("d"))  # sorted neighbours: b before c
    assert not found.truncated


def test_cycles_end_at_the_visited_set_and_never_reach_the_origin() -> None:
    graph = LineageGraph([*chain("a", "b", "c", "a"), Edge(u("c"), u("c"))])
    assert reach(graph, "a") == {"b": 1, "c": 2}
    assert reach(graph, "c") == {"a": 1, "b": 2}


def test_a_blocked_edge_stops_the_tag_and_its_subtags_but_not_others() -> None:
    graph = LineageGraph([*chain("a", "b"), *chain("b", "c", blocked_tags=frozenset({"PII"}))])
    assert reach(graph, "a", "PII") == {"b": 1}
    assert reach(graph, "a", "PII.email") == {"b": 1}
    assert reach(graph, "a", "PIIX") == {"b": 1, "c": 2}
    assert reach(graph, "a", "GDPR") == {"b": 1, "c": 2}


def test_another_path_around_a_blocked_edge_still_carries_the_tag() -> None:
    graph = LineageGraph(
        [Edge(u("a"), u("c"), blocked_tags=frozenset({"PII"})), *chain("a", "b", "c")],
    )
    assert reach(graph, "a") == {"b": 1, "c": 2}


def test_max_depth_truncates_and_says_so() -> None:
    graph = LineageGraph(chain("a", "b", "c", "d"))
    found = closure(graph, u("a"), "PII", Limits(max_depth=2))
    assert set(found.reached) == {u("b"), u("c")}
    assert (found.truncated, found.reason, found.max_depth) == (True, "max_depth", 2)
    exact = closure(graph, u("a"), "PII", Limits(max_depth=3))
    assert (exact.truncated, exact.reason, len(exact.reached)) == (False, None, 3)


def test_max_fanout_follows_the_first_edges_in_urn_order() -> None:
    graph = LineageGraph([Edge(u("a"), u(f"t{i}")) for i in range(5)])
    found = closure(graph, u("a"), "PII", Limits(max_fanout=3))
    assert set(found.reached) == {u("t0"), u("t1"), u("t2")}
    assert (found.truncated, found.reason) == (True, "max_fanout")


def test_max_reached_stops_at_the_limit_exactly() -> None:
    graph = LineageGraph(chain(*(f"n{i}" for i in range(10))))
    found = closure(graph, u("n0"), "PII", Limits(max_reached=4))
    assert len(found.reached) == 4
    assert (found.truncated, found.reason) == (True, "max_reached")
    assert not closure(graph, u("n0"), "PII", Limits(max_reached=9)).truncated


def test_the_time_budget_truncates_a_long_walk() -> None:
    graph = LineageGraph(chain(*(f"n{i}" for i in range(5000))))
    ticks = itertools.count()
    found = closure(graph, u("n0"), "PII", Limits(max_depth=10_000, time_budget_s=100), clock=lambda: next(ticks) * 60)
    assert (found.truncated, found.reason) == (True, "time_budget")
    assert 0 < len(found.reached) < 4999


def test_excluded_assets_are_neither_reached_nor_crossed() -> None:
    graph = LineageGraph(chain("a", "b", "c"))
    assert reach(graph, "a", excluded=frozenset({u("b")})) == {}


def test_replacing_and_removing_edges_updates_the_walk() -> None:
    graph = LineageGraph(chain("a", "b"))
    graph.put(Edge(u("a"), u("b"), "none"))
    assert reach(graph, "a") == {}
    graph.put(Edge(u("a"), u("b")))
    assert reach(graph, "a") == {"b": 1}
    assert graph.remove((u("a"), u("b"))) is not None
    assert reach(graph, "a") == {}
    assert graph.remove((u("a"), u("b"))) is None
    assert len(graph) == 0


@pytest.mark.parametrize("width", [1, 7])
def test_results_do_not_depend_on_insertion_order(width: int) -> None:
    edges = [Edge(u("a"), u(f"m{i}")) for i in range(width)] + [Edge(u(f"m{i}"), u("z")) for i in range(width)]
    forward = closure(LineageGraph(edges), u("a"), "PII")
    backward = closure(LineageGraph(reversed(edges)), u("a"), "PII")
    assert forward == backward
