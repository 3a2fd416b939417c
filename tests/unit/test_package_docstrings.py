"""Package docstrings name only what exists: every ````name```` in a package's ``__init__`` docstring that reads as a
module of that package is one (a module, a subpackage, or a name its modules define), and every dotted first-party
name resolves to a module, a name defined in one, a Kafka topic or an entry-point group."""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

from tenants import naming

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
TOPS: list[str] = PROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
# Names that are not modules: topics (``metalake.changes``), databases (``metalake_control``), entry-point groups.
NOT_MODULES = {v for v in vars(naming).values() if isinstance(v, str)} | set(PROJECT["project"]["entry-points"])
TOKEN = re.compile(r"``([A-Za-z_][\w.]*)``")


def _packages() -> list[Path]:
    return sorted(init for top in TOPS for init in (ROOT / top).rglob("__init__.py") if "__pycache__" not in init.parts)


@functools.cache
def _defined(module: Path) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments)."""
    names: set[str] = set()
    for node in ast.parse(module.read_text("utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


@functools.cache
def _strings(module: Path) -> set[str]:
    """The string literals of a module: the field names it reads (dbt's ``depends_on``)."""
    tree = ast.parse(module.read_text("utf-8"))
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _module_file(dotted: str) -> Path | None:
    base = ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _resolves(dotted: str) -> bool:
    """A first-party module or package, or a name defined in one (``api.app.ROUTERS``)."""
    if dotted in NOT_MODULES or _module_file(dotted) is not None:
        return True
    module, _, name = dotted.rpartition(".")
    found = _module_file(module) if module else None
    return found is not None and name in _defined(found)


def _local(package: Path, name: str) -> bool:
    """A bare lowercase name in a package docstring: one of its modules or subpackages, a name its modules define or
    spell (a field they read), a topic or database, or a library (``fastapi``)."""
    folder = package.parent
    if (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file() or name in NOT_MODULES:
        return True
    if any(name in _defined(module) | _strings(module) for module in folder.glob("*.py")):
        return True
    return importlib.util.find_spec(name) is not None


def _unresolved(package: Path) -> list[str]:
    doc = ast.get_docstring(ast.parse(package.read_text("utf-8"))) or ""
    missing = []
    for token in TOKEN.findall(doc):
        if token.split(".")[0] in TOPS:
            if not _resolves(token):
                missing.append(token)
        elif "." not in token and token.islower() and not _local(package, token):
            missing.append(token)
    return missing


@pytest.mark.parametrize("package", _packages(), ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_a_package_docstring_names_only_what_exists(package: Path) -> None:
    missing = _unresolved(package)
    assert not missing, f"{package.relative_to(ROOT)}'s docstring names what does not exist: {missing}"


def test_the_check_catches_a_module_that_is_gone(tmp_path: Path) -> None:
    # The check itself: a docstring naming a module its package does not have fails.
    package = ROOT / "processors" / "enrichment" / "__init__.py"
    fake = tmp_path / "processors" / "enrichment"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('"""``parse`` and ``writer``; ``processors.enrichment.catalog``."""\n', "utf-8")
    (fake / "parse.py").write_text("", "utf-8")
    assert _unresolved(fake / "__init__.py") == ["writer", "processors.enrichment.catalog"]
    assert _unresolved(package) == []
