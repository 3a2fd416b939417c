"""Parse one dbt artifact in a child process, under a memory limit, and hand back only what the mapping reads.

Run as a script (``python -I -S parse_child.py <kind> <memory bytes> <max depth> <max elements>``) with the artifact
on stdin: stdlib only, so it needs no site-packages and imports nothing of the worker. Parsed in the worker itself, a
256 MiB manifest held the GIL for seconds and took ~25x its size in the process every tenant's connectors share, and a
deeply nested one raised ``RecursionError`` out of the crawl. Here the address space is limited first
(``RLIMIT_AS``); then the artifact is parsed, cut down to the sections and nodes the mapping reads (a manifest's
relations, sources and groups; macros, docs, tests and the maps are dropped), and checked for depth and element count
before it is written to stdout as compact JSON, which the worker can then parse safely.

Exit status 0: stdout is the cut-down artifact. Exit status 2: stdout is ``{"error": <class>, "detail": <words>}``.
Anything else (killed, crashed) the worker reports as the artifact needing more memory than it may take.
"""

from __future__ import annotations

import json
import resource
import sys
from typing import Any

# What the mapping (connectors.dbt.mapping) reads of each artifact; everything else is dropped in the child.
SECTIONS = {"manifest": ("metadata", "nodes", "sources", "groups"), "catalog": ("metadata", "nodes", "sources")}
# The nodes the mapping reads: relations (ephemeral models included: lineage passes through them). Tests, analyses,
# operations and unit tests are most of a big project's manifest and become nothing.
RELATION_TYPES = frozenset({"model", "seed", "snapshot", "source"})


class Refused(Exception):
    """The artifact is over a bound: ``kind`` is the error class, the message says which bound in words."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def cut(data: Any, kind: str) -> dict[str, Any]:  # noqa: ANN401
    """The sections of ``data`` the mapping reads; a manifest's nodes only the relations."""
    if not isinstance(data, dict):
        return {}
    out = {key: data[key] for key in SECTIONS.get(kind, ()) if key in data}
    nodes = out.get("nodes")
    if kind == "manifest" and isinstance(nodes, dict):
        out["nodes"] = {
            k: v for k, v in nodes.items() if isinstance(v, dict) and v.get("resource_type") in RELATION_TYPES
        }
    return out


def check(value: Any, max_depth: int, max_elements: int) -> None:  # noqa: ANN401
    """Refuse a value nested deeper than ``max_depth`` or holding more than ``max_elements`` values (iteratively:
    the check itself never recurses; a container's values are counted before any of them is visited)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    elements = 1
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            raise Refused("nested-too-deeply", f"nests deeper than {max_depth} levels")
        children = item.values() if isinstance(item, dict) else item
        elements += len(children)
        if elements > max_elements:
            raise Refused("too-many-elements", f"holds more than {max_elements} JSON values")
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def _fail(kind: str, detail: str) -> int:
    sys.stdout.write(json.dumps({"error": kind, "detail": detail}))
    return 2


def main(argv: list[str]) -> int:
    kind, memory, max_depth, max_elements = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    try:
        data = json.loads(sys.stdin.buffer.read())
        kept = cut(data, kind)
        del data
        check(kept, max_depth, max_elements)
        text = json.dumps(kept, separators=(",", ":"))
    except Refused as exc:
        return _fail(exc.kind, str(exc))
    except RecursionError:
        return _fail("nested-too-deeply", "nests deeper than the JSON parser's stack")
    except MemoryError:
        return _fail("too-large", f"needs more than {memory} bytes of memory to parse")
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError: where, never what
        return _fail("not-json", f"is not JSON ({type(exc).__name__} at byte {getattr(exc, 'pos', '?')})")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
