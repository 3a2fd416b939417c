"""Tag propagation along lineage (Apache Atlas semantics, column level).

``graph`` (the closure, pure), ``model`` and ``tenant`` (what is held per tenant), ``diff`` (a recompute as rows to
add and remove), ``events`` (what is published), ``store`` (loading from MongoDB), ``processor`` and ``run`` (the
consumer of ``metalake.changes``), ``dry_run`` (what a tag would reach). See docs/propagation.md.
"""

from processors.propagation.dry_run import DryRun, Reached, dry_run, dry_run_tenant
from processors.propagation.graph import Closure, Edge, Limits, LineageGraph, closure

__all__ = [
    "Closure",
    "DryRun",
    "Edge",
    "Limits",
    "LineageGraph",
    "Reached",
    "closure",
    "dry_run",
    "dry_run_tenant",
]
