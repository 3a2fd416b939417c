"""The lineage graph of one tenant and the closure of a tag over it (Apache Atlas semantics, column level).

Pure and in memory. Nodes are asset URNs of any kind: a table edge links tables, a column edge links columns, and a
tag travels only along the edges of the asset that holds it (a column's tag follows column edges). Each edge says
which way tags flow across it (``propagation``) and which tags it stops (``blocked_tags``, e.g. a hashing step
stops PII). The walk is breadth-first with sorted neighbours, so every reached asset gets a shortest path and the
result is the same on every run; the visited set is the loop guard on cycles.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal, get_args

Direction = Literal["downstream", "upstream", "both", "none"]
DIRECTIONS: tuple[Direction, ...] = get_args(Direction)
TruncationReason = Literal["max_depth", "max_fanout", "max_reached", "time_budget"]
EdgeKey = tuple[str, str]  # (upstream, urn): the key of lineage_edges


@dataclass(frozen=True)
class Edge:
    """Data flows from ``upstream`` into ``urn``; tags cross it as ``propagation`` says, unless blocked."""

    upstream: str
    urn: str
    propagation: Direction = "downstream"
    blocked_tags: frozenset[str] = frozenset()

    @property
    def key(self) -> EdgeKey:
        return (self.upstream, self.urn)

    def blocks(self, tag: str) -> bool:
        # A blocked tag also stops its sub-tags: blocking "PII" stops "PII.email".
        return any(tag == b or tag.startswith(b + ".") for b in self.blocked_tags)

    def flows(self) -> Iterator[tuple[str, str]]:
        """The (from, to) pairs tags may travel along this edge."""
        if self.propagation in ("downstream", "both"):
            yield (self.upstream, self.urn)
        if self.propagation in ("upstream", "both"):
            yield (self.urn, self.upstream)


@dataclass(frozen=True)
class Limits:
    """Guardrails of one closure: hops from the origin, eligible edges followed per asset, assets reached, seconds."""

    max_depth: int = 10
    max_fanout: int = 1000
    max_reached: int = 100_000
    time_budget_s: float = 5.0


@dataclass(frozen=True)
class Reach:
    """How the tag got to an asset: ``path`` runs from the origin to the asset (both included)."""

    path: tuple[str, ...]

    @property
    def depth(self) -> int:
        return len(self.path) - 1


@dataclass(frozen=True)
class Closure:
    """The assets a tag reaches from its origin (the origin itself excluded), and whether a guardrail cut it short."""

    origin: str
    tag: str
    reached: dict[str, Reach] = field(default_factory=dict)
    truncated: bool = False
    reason: TruncationReason | None = None

    @property
    def max_depth(self) -> int:
        return max((r.depth for r in self.reached.values()), default=0)


class LineageGraph:
    """A tenant's lineage edges, indexed by the asset tags leave from. Not thread-safe: one owner at a time."""

    def __init__(self, edges: Iterable[Edge] = ()) -> None:
        self._edges: dict[EdgeKey, Edge] = {}
        self._out: dict[str, dict[EdgeKey, str]] = {}
        self._in: dict[str, dict[EdgeKey, str]] = {}
        for edge in edges:
            self.put(edge)

    def __len__(self) -> int:
        return len(self._edges)

    def __contains__(self, key: object) -> bool:
        return key in self._edges

    def get(self, key: EdgeKey) -> Edge | None:
        return self._edges.get(key)

    def put(self, edge: Edge) -> None:
        """Add the edge, or replace the one with the same (upstream, urn)."""
        self.remove(edge.key)
        self._edges[edge.key] = edge
        for src, dst in edge.flows():
            self._out.setdefault(src, {})[edge.key] = dst
            self._in.setdefault(dst, {})[edge.key] = src

    def remove(self, key: EdgeKey) -> Edge | None:
        edge = self._edges.pop(key, None)
        if edge is not None:
            for src, dst in edge.flows():
                for index, node in ((self._out, src), (self._in, dst)):
                    hops = index.get(node)
                    if hops is not None:
                        hops.pop(key, None)
                        if not hops:
                            del index[node]
        return edge

    def sources(self, urn: str) -> set[str]:
        """The assets a tag may travel to ``urn`` from in one hop (whatever the tag)."""
        return set(self._in.get(urn, {}).values())

    def next_hops(self, urn: str, tag: str) -> list[str]:
        """The assets ``tag`` may travel to from ``urn`` in one hop, sorted (deterministic walks)."""
        out = self._out.get(urn)
        if not out:
            return []
        return sorted({dst for key, dst in out.items() if not self._edges[key].blocks(tag)})


def closure(
    graph: LineageGraph,
    origin: str,
    tag: str,
    limits: Limits = Limits(),
    *,
    excluded: frozenset[str] | set[str] = frozenset(),
    clock: Callable[[], float] = time.monotonic,
) -> Closure:
    """Breadth-first walk of ``tag`` from ``origin``. ``excluded`` assets (deleted ones) are neither reached nor
    crossed. A guardrail that stops the walk sets ``truncated`` and names itself in ``reason``; what was reached
    before it stays in the result."""
    deadline = clock() + limits.time_budget_s
    reached: dict[str, Reach] = {}
    visited = {origin}
    frontier: deque[tuple[str, tuple[str, ...]]] = deque([(origin, (origin,))])
    reason: TruncationReason | None = None
    steps = 0
    while frontier:
        steps += 1
        if steps % 1024 == 0 and clock() > deadline:
            reason = "time_budget"
            break
        urn, path = frontier.popleft()
        hops = [h for h in graph.next_hops(urn, tag) if h not in visited and h not in excluded]
        if not hops:
            continue
        if len(path) - 1 >= limits.max_depth:
            reason = reason or "max_depth"
            continue
        if len(hops) > limits.max_fanout:
            reason = reason or "max_fanout"
            hops = hops[: limits.max_fanout]
        for hop in hops:
            if len(reached) >= limits.max_reached:
                return Closure(origin, tag, reached, True, "max_reached")
            visited.add(hop)
            hop_path = (*path, hop)
            reached[hop] = Reach(hop_path)
            frontier.append((hop, hop_path))
    return Closure(origin, tag, reached, reason is not None, reason)
