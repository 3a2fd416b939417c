"""Nothing deployable assumes the local stack: no ``.stack`` path in code, no setting defaulting into its folder.

The local stack (``ops``), the tests and the benchmarks may use ``.stack/``; the deployables (``metalake``,
``tenants``, ``control``, ``api``, ``connectors``, ``processors``) read every path and address from configuration.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ops.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOYABLES = ("metalake", "catalog", "tenants", "control", "api", "connectors", "processors")
# The one place that may name the stack's folder: the operator tooling's own settings (``stack.dir``), and the
# property through which the tooling reads it.
ALLOWED = {("metalake/settings.py", "local_stack_dir")}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _offences(path: Path) -> list[str]:
    rel = path.relative_to(ROOT).as_posix()
    tree = ast.parse(path.read_text(), filename=rel)
    docstrings = _docstrings(tree)
    allowed_functions = {name for file, name in ALLOWED if file == rel}
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in allowed_functions:
            skip |= {id(n) for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if ".stack" in node.value:
                out.append(f"{rel}:{node.lineno}: a '.stack' path: {node.value[:60]!r}")
        elif isinstance(node, ast.Attribute) and node.attr == "local_stack_dir":
            out.append(f"{rel}:{node.lineno}: reads the local stack's folder (local_stack_dir)")
        elif isinstance(node, ast.Attribute) and node.attr == "dir" and _is_stack(node.value):
            out.append(f"{rel}:{node.lineno}: reads the local stack's folder (stack.dir)")
    return out


def _is_stack(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "stack") or (
        isinstance(node, ast.Name) and node.id == "stack"
    )


def test_no_deployable_code_reads_the_local_stack() -> None:
    offences = [
        line for package in DEPLOYABLES for path in sorted((ROOT / package).rglob("*.py")) for line in _offences(path)
    ]
    assert offences == []


def test_the_scan_finds_what_it_looks_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The scan itself: a string path, the stack's folder by either name; not a docstring.
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    bad = tmp_path / "bad.py"
    bad.write_text(
        '"""Mentions .stack/ in prose."""\n'
        'RULES = ".stack/run/trino/etc/rules.json"\n'
        "def f(settings):\n"
        "    return settings.local_stack_dir, settings.stack.dir\n"
    )
    found = _offences(bad)
    assert [line.split(":")[1] for line in found] == ["2", "4", "4"]


def _paths(model: BaseModel, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            out |= _paths(value, f"{prefix}{name}.")
        else:
            out[f"{prefix}{name}"] = value
    return out


def test_no_setting_defaults_into_the_stack_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for variable in list(os.environ):
        if variable.upper().startswith("METALAKE_"):
            monkeypatch.delenv(variable)
    stack_dir = tmp_path / "stack"
    monkeypatch.setenv("METALAKE_STACK__DIR", str(stack_dir))
    values = _paths(Settings())
    under = {name: value for name, value in values.items() if name != "stack.dir" and str(stack_dir) in str(value)}
    assert under == {}
    # What a deployment must set: no default at all.
    assert (values["lake.root"], values["lake.checkpoint_root"]) == (None, None)
    assert (values["spark.jars_dir"], values["access.rules_file"]) == (None, None)
