"""Tag propagation semantics (Apache Atlas, column level), shared by the processor that applies them
(``processors.propagation``) and the admin API's dry run.

``graph`` (the closure, pure), ``model`` and ``tenant`` (what is held per tenant), ``diff`` (a recompute as rows to
add and remove), ``store`` (loading a tenant from MongoDB), ``dry_run`` (what a tag would reach), ``config`` (the
guardrails from settings). See docs/propagation.md.
"""

from catalog.propagation.dry_run import DryRun, Reached, dry_run, dry_run_tenant
from catalog.propagation.graph import Closure, Edge, Limits, LineageGraph, closure

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
