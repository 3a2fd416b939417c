"""Bounded breadth-first traversal of lineage edges, upstream or downstream, one query per level.

Bounded twice: by depth (at most :data:`MAX_DEPTH` levels) and by a node budget, so a hub asset with a huge fan-out
costs a known amount. A cycle ends where it meets a node already reached (the shallowest depth wins). The result
says whether it is complete and, if not, which bound cut it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from catalog.projection import LineageDoc

Direction = Literal["upstream", "downstream"]
MAX_DEPTH = 10
DEFAULT_DEPTH = 3
MAX_NODES = 2000
DEFAULT_NODES = 500

Edge = LineageDoc
EdgeFetch = Callable[[Iterable[str], Direction], list[Edge]]


@dataclass
class Traversal:
    root: str
    direction: Direction
    depth: int
    reached: dict[str, int] = field(default_factory=dict)  # urn -> depth (root excluded)
    edges: list[Edge] = field(default_factory=list)
    truncated: bool = False
    reason: str | None = None


def _next_hop(edge: Edge, direction: Direction) -> str:
    return str(edge["urn"] if direction == "downstream" else edge["upstream"])


def traverse(root: str, direction: Direction, depth: int, max_nodes: int, fetch: EdgeFetch) -> Traversal:
    """Assets within ``depth`` hops of ``root`` and the edges between them (each edge once, in discovery order)."""
    if not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be 1..{MAX_DEPTH}")
    result = Traversal(root, direction, depth)
    seen_edges: set[tuple[str, str]] = set()
    frontier = [root]
    for level in range(1, depth + 1):
        discovered: list[str] = []
        for edge in fetch(frontier, direction):
            hop = _next_hop(edge, direction)
            if hop != root and hop not in result.reached:
                if len(result.reached) >= max_nodes:
                    result.truncated, result.reason = True, f"node budget of {max_nodes} reached"
                    return result
                result.reached[hop] = level
                discovered.append(hop)
            key = (str(edge["upstream"]), str(edge["urn"]))
            if key not in seen_edges:
                seen_edges.add(key)
                result.edges.append(edge)
        frontier = discovered
        if not frontier:
            return result
    # The levels ran out with nodes left to expand: keep the edges among reached nodes, and say whether anything
    # lies beyond the last level.
    for edge in fetch(frontier, direction):
        hop = _next_hop(edge, direction)
        if hop == root or hop in result.reached:
            key = (str(edge["upstream"]), str(edge["urn"]))
            if key not in seen_edges:
                seen_edges.add(key)
                result.edges.append(edge)
        else:
            result.truncated, result.reason = True, f"depth {depth} reached"
    return result
