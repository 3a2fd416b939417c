"""The one plugin registry: classes registered by name under an entry-point group (``metalake.connectors``,
``metalake.outbound``).

Lookup is by registered name only, never by import path: tenant admins choose a type through the API, and an
import path would let them load arbitrary code. A plugin that fails to import (a missing optional dependency), is not
a concrete class of the expected base, or whose name two distributions register, is listed as disabled with its
reason instead of breaking the process or the other plugins. The group is scanned once per process, on first use.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

T = TypeVar("T")

log = logging.getLogger(__name__)


class EntryPointLike(Protocol):
    """What the registry reads of an entry point (``importlib.metadata.EntryPoint``, or a test's fake)."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str: ...

    def load(self) -> Any: ...  # noqa: ANN401


EntryPoints = Callable[[str], Iterable[EntryPointLike]]


def installed_entry_points(group: str) -> Iterable[EntryPointLike]:
    """The entry points the installed distributions declare for ``group``."""
    return importlib.metadata.entry_points(group=group)


class UnknownPlugin(LookupError):
    """No plugin of that name, or it is disabled (the message says which and why)."""


@dataclass(frozen=True)
class Plugin(Generic[T]):
    """A registered name and its class, or ``None`` and the reason it is disabled."""

    name: str
    cls: T | None
    disabled_reason: str | None = None


class PluginRegistry(Generic[T]):
    """The plugins of one entry-point group. ``T`` is the class type a plugin must be (``type[Destination]``, or a
    union of class types); ``bases`` are the classes that type names, checked with ``issubclass`` at load."""

    def __init__(
        self,
        group: str,
        bases: tuple[type, ...],
        *,
        entry_points: EntryPoints = installed_entry_points,
    ) -> None:
        # An explicit entry-point source: tests, and checks of a checkout's own declarations before it is installed.
        self.group = group
        self.bases = bases
        self._entry_points = entry_points
        self._lock = threading.Lock()
        self._plugins: dict[str, Plugin[T]] | None = None

    def plugins(self) -> dict[str, Plugin[T]]:
        """Every registered name, enabled or disabled (scanned on the first call, then kept)."""
        with self._lock:
            if self._plugins is None:
                self._plugins = self._scan()
            return dict(self._plugins)

    def enabled(self) -> dict[str, T]:
        """The classes of the enabled plugins by name."""
        return {name: p.cls for name, p in self.plugins().items() if p.cls is not None}

    def get(self, name: str) -> T:
        """The class registered as ``name``; :class:`UnknownPlugin` if there is none or it is disabled."""
        plugins = self.plugins()
        plugin = plugins.get(name)
        if plugin is None:
            known = ", ".join(sorted(plugins)) or "none"
            raise UnknownPlugin(f"unknown {self.group} plugin {name!r}; known: {known}")
        if plugin.cls is None:
            raise UnknownPlugin(f"{self.group} plugin {name!r} is disabled: {plugin.disabled_reason}")
        return plugin.cls

    def reset(self) -> None:
        """Forget the scan: the next call scans the group again (tests that install or fake plugins)."""
        with self._lock:
            self._plugins = None

    def _scan(self) -> dict[str, Plugin[T]]:
        found: dict[str, Plugin[T]] = {}
        values: dict[str, str] = {}
        for ep in self._entry_points(self.group):
            if ep.name in found:
                reason = f"registered twice: {values[ep.name]} and {ep.value}"
                found[ep.name] = Plugin(ep.name, None, reason)
                continue
            values[ep.name] = ep.value
            found[ep.name] = self._load(ep)
            if found[ep.name].cls is None:
                log.warning(
                    "plugin.disabled",
                    extra={"group": self.group, "plugin": ep.name, "reason": found[ep.name].disabled_reason},
                )
        return found

    def _load(self, ep: EntryPointLike) -> Plugin[T]:
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001 - any import-time failure disables this plugin, not the process
            return Plugin(ep.name, None, f"{type(exc).__name__}: {exc}")
        expected = " or ".join(b.__name__ for b in self.bases)
        if not (isinstance(obj, type) and issubclass(obj, self.bases)):
            return Plugin(ep.name, None, f"{ep.value} is not a {expected}")
        if inspect.isabstract(obj):
            return Plugin(ep.name, None, f"{ep.value} is abstract")
        # The issubclass check above is what T promises: the class of one of ``bases``.
        return Plugin(ep.name, cast(T, obj))
