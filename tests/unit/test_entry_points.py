"""Every entry point of every ``metalake.*`` plugin group declared in pyproject.toml loads and is enabled.

The entry points are read from this checkout's pyproject.toml (the installed metadata may lag behind it) and run
through each group's own registry rules (its bases), so a broken import path, a class of the wrong base or a missing
dependency of the default install fails here instead of disabling a plugin in production.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from control.connectors import registry as connectors
from control.provisioning import launcher
from control.subscriptions import destinations
from metalake.plugins import PluginRegistry
from processors.outbound.runtime import destination

ROOT = Path(__file__).resolve().parents[2]
REGISTRIES: dict[str, PluginRegistry[Any]] = {
    connectors.GROUP: connectors.REGISTRY,
    destinations.GROUP: destinations.SPECS,
    launcher.GROUP: launcher.LAUNCHERS,
}


def _declared() -> dict[str, dict[str, str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups: dict[str, dict[str, str]] = project.get("entry-points", {})
    return {group: eps for group, eps in groups.items() if group.startswith("metalake.")}


def test_every_declared_group_has_a_registry() -> None:
    assert set(_declared()) == set(REGISTRIES)


@pytest.mark.parametrize("group", sorted(REGISTRIES))
def test_every_entry_point_of_the_group_loads_enabled(group: str) -> None:
    declared = _declared()[group]
    assert declared, f"{group} declares no plugin"
    eps = [EntryPoint(name, value, group) for name, value in declared.items()]
    checked: PluginRegistry[Any] = PluginRegistry(group, REGISTRIES[group].bases, entry_points=lambda _group: eps)
    plugins = checked.plugins()
    assert {n: p.disabled_reason for n, p in plugins.items() if p.cls is None} == {}
    assert set(plugins) == set(declared)


@pytest.mark.parametrize("group", sorted(REGISTRIES))
def test_the_installed_registry_has_no_disabled_plugin(group: str) -> None:
    plugins = REGISTRIES[group].plugins()
    assert {n: p.disabled_reason for n, p in plugins.items() if p.cls is None} == {}
    assert set(_declared()[group]) <= set(plugins)


def test_every_destination_spec_names_a_runtime_class_that_names_it_back() -> None:
    # The runtime's registry is the spec registry's names, each resolved to the class its spec names.
    group = destinations.GROUP
    eps = [EntryPoint(name, value, group) for name, value in _declared()[group].items()]
    specs: PluginRegistry[Any] = PluginRegistry(group, destinations.SPECS.bases, entry_points=lambda _group: eps)
    implementations = [EntryPoint(name, spec.implementation, group) for name, spec in specs.enabled().items()]
    runtime: PluginRegistry[Any] = PluginRegistry(
        group, destination.REGISTRY.bases, entry_points=lambda _group: implementations
    )
    plugins = runtime.plugins()
    assert {n: p.disabled_reason for n, p in plugins.items() if p.cls is None} == {}
    assert {name: p.cls.spec for name, p in plugins.items()} == specs.enabled()
    assert all(spec.name == name for name, spec in specs.enabled().items())
