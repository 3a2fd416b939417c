"""The code zip a cluster's executors run holds every first-party package the row functions reach: a package left out
of ``shipping.PACKAGES`` fails on the executors only (ModuleNotFoundError in a task), never on a local master."""

from __future__ import annotations

import ast
import tomllib
import zipfile
from pathlib import Path

from processors.enrichment.shipping import PACKAGES, code_archive

ROOT = Path(__file__).resolve().parents[4]
TOPS = set(
    tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["hatch"]["build"]["targets"]["wheel"][
        "packages"
    ]
)


def _file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def _reached(start: str) -> set[str]:
    """The first-party modules ``start`` imports, transitively (lazy imports and ``from package import module``
    included)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        module = todo.pop()
        path = _file(module)
        if module in seen or path is None:
            continue
        seen.add(module)
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            todo += [n for n in names if n.split(".")[0] in TOPS]
            # A module's packages run their __init__ first.
            todo += [
                ".".join(n.split(".")[:i]) for n in names if n.split(".")[0] in TOPS for i in range(1, n.count(".") + 1)
            ]
    return seen


def test_the_zip_holds_every_package_the_row_functions_reach(tmp_path: Path) -> None:
    needed = {module.split(".")[0] for module in _reached("processors.enrichment.rows")}
    assert {"metalake", "catalog", "processors"} <= needed  # the scan sees what the rows import
    assert needed <= set(PACKAGES), f"the executors would miss {sorted(needed - set(PACKAGES))}"
    with zipfile.ZipFile(code_archive(tmp_path)) as archive:
        zipped = {name.split("/")[0] for name in archive.namelist()}
    assert needed <= zipped
