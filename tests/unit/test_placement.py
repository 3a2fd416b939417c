"""Shared layers hold only what is shared: a module of the kernel (``metalake``), the metadata model (``catalog``),
``tenants`` or the control plane (``control``) that one deployable alone imports (``api``, ``connectors``,
``processors`` or ``ops``, and no other shared module) belongs in that deployable. Tests, benchmarks and deployment
scripts do not count as importers.
(That a package docstring names only modules that exist is tests/unit/test_package_docstrings.py.)"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ("metalake", "catalog", "tenants", "control")
DEPLOYABLES = ("api", "connectors", "processors", "ops")


@functools.cache
def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for top in SHARED + DEPLOYABLES:
        for path in (ROOT / top).rglob("*.py"):
            dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[dotted.removesuffix(".__init__")] = path
    return found


def _imported(path: Path) -> set[str]:
    """The first-party modules ``path`` imports, at its top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names & _modules().keys()


def _importers() -> dict[str, set[str]]:
    """Each shared module's importers, by the top package they are in (its own package's other modules count)."""
    out: dict[str, set[str]] = {}
    for module, path in _modules().items():
        for name in _imported(path):
            if name.split(".")[0] in SHARED and name != module:
                out.setdefault(name, set()).add(module.split(".")[0])
    return out


def test_no_module_of_a_shared_layer_serves_one_deployable_only() -> None:
    one_user = {
        module: users.pop()
        for module, users in _importers().items()
        if len(users) == 1 and next(iter(users)) in DEPLOYABLES
    }
    assert not one_user, f"shared modules only one deployable imports (move each into it): {one_user}"


def test_the_scan_sees_imports_inside_functions_and_from_packages() -> None:
    # The check is only as good as the import scan: a lazy import and a `from package import module` both count.
    importers = _importers()
    assert "ops" in importers["metalake.settings"]
    assert {"api", "connectors"} <= importers["control.connectors.store"]
    assert _imported(ROOT / "processors" / "lake" / "audit.py") >= {"control.audit"}
