"""The kernel's plugin registry over fake entry points: names only, disabled-with-reason, one scan per process."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pytest

from metalake.plugins import EntryPointLike, PluginRegistry, UnknownPlugin


class Base(ABC):
    @abstractmethod
    def run(self) -> str: ...


class Other:
    pass


class Good(Base):
    def run(self) -> str:
        return "good"


class Abstract(Base):
    pass


@dataclass(frozen=True)
class FakeEntryPoint:
    name: str
    value: str
    loader: Callable[[], Any]

    def load(self) -> Any:
        return self.loader()


def _missing_dependency() -> Any:
    raise ModuleNotFoundError("No module named 'vendor_sdk'")


def _broken_module() -> Any:
    raise RuntimeError("boom at import")


class Scans:
    """Fake ``entry_points``: the given entry points for the group, counting scans."""

    def __init__(self, *eps: FakeEntryPoint) -> None:
        self.eps = eps
        self.calls: list[str] = []

    def __call__(self, group: str) -> Iterable[EntryPointLike]:
        self.calls.append(group)
        return self.eps


def _registry(*eps: FakeEntryPoint) -> tuple[PluginRegistry[type[Base]], Scans]:
    scans = Scans(*eps)
    return PluginRegistry("test.group", (Base,), entry_points=scans), scans


def test_a_plugin_is_found_by_its_registered_name() -> None:
    registry, _ = _registry(FakeEntryPoint("good", "pkg.mod:Good", lambda: Good))
    assert registry.get("good") is Good
    assert registry.enabled() == {"good": Good}
    assert registry.plugins()["good"].disabled_reason is None


def test_an_import_path_is_not_a_name() -> None:
    registry, _ = _registry(FakeEntryPoint("good", "pkg.mod:Good", lambda: Good))
    for name in ("pkg.mod:Good", "tests.unit.metalake.test_plugins:Good", "os:system"):
        with pytest.raises(UnknownPlugin, match="unknown"):
            registry.get(name)


@pytest.mark.parametrize(
    ("loader", "reason"),
    [
        (_missing_dependency, "ModuleNotFoundError: No module named 'vendor_sdk'"),
        (_broken_module, "RuntimeError: boom at import"),
        (lambda: Other, "pkg.mod:Bad is not a Base"),
        (lambda: Good(), "pkg.mod:Bad is not a Base"),  # an instance, not a class
        (lambda: Abstract, "pkg.mod:Bad is abstract"),
    ],
    ids=["missing-dependency", "import-error", "wrong-base", "not-a-class", "abstract"],
)
def test_a_plugin_that_cannot_be_used_is_disabled_with_its_reason_and_the_others_load(
    loader: Callable[[], Any], reason: str
) -> None:
    registry, _ = _registry(
        FakeEntryPoint("bad", "pkg.mod:Bad", loader), FakeEntryPoint("good", "pkg.mod:Good", lambda: Good)
    )
    plugins = registry.plugins()
    assert plugins["bad"].cls is None
    assert plugins["bad"].disabled_reason == reason
    assert registry.enabled() == {"good": Good}
    with pytest.raises(UnknownPlugin, match="disabled"):
        registry.get("bad")


def test_a_name_registered_twice_is_disabled() -> None:
    registry, _ = _registry(
        FakeEntryPoint("good", "one:Good", lambda: Good), FakeEntryPoint("good", "two:Good", lambda: Good)
    )
    plugin = registry.plugins()["good"]
    assert plugin.cls is None
    assert plugin.disabled_reason == "registered twice: one:Good and two:Good"


def test_several_bases_accept_a_subclass_of_any() -> None:
    registry: PluginRegistry[type[Base] | type[Other]] = PluginRegistry(
        "test.group",
        (Base, Other),
        entry_points=Scans(FakeEntryPoint("a", "m:Good", lambda: Good), FakeEntryPoint("b", "m:Other", lambda: Other)),
    )
    assert registry.enabled() == {"a": Good, "b": Other}


def test_the_group_is_scanned_once_until_reset() -> None:
    loads: list[str] = []

    def load() -> Any:
        loads.append("good")
        return Good

    registry, scans = _registry(FakeEntryPoint("good", "pkg.mod:Good", load))
    registry.plugins()
    registry.get("good")
    registry.enabled()
    assert scans.calls == ["test.group"]
    assert loads == ["good"]
    registry.reset()
    registry.plugins()
    assert scans.calls == ["test.group", "test.group"]


def test_the_listing_is_a_copy() -> None:
    registry, _ = _registry(FakeEntryPoint("good", "pkg.mod:Good", lambda: Good))
    registry.plugins().clear()
    assert "good" in registry.plugins()


def test_an_empty_group_names_no_plugin() -> None:
    registry, _ = _registry()
    assert registry.plugins() == {}
    with pytest.raises(UnknownPlugin, match="known: none"):
        registry.get("anything")
