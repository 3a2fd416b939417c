"""Connector plugins, registered by name through the ``metalake.connectors`` entry-point group.

Lookup is by registered name only (tenant admins choose a type through the API; an import path would let them load
arbitrary code). A plugin that fails to import is listed as disabled with its reason instead of breaking the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from connectors.base import ConnectorConfig, SourceConnector, WebhookConnector

GROUP = "metalake.connectors"

ConnectorClass = type[WebhookConnector[Any]] | type[SourceConnector[Any]]


class UnknownConnector(LookupError):
    pass


@dataclass(frozen=True)
class Plugin:
    name: str
    cls: ConnectorClass | None
    disabled_reason: str | None = None

    @property
    def config_model(self) -> type[ConnectorConfig]:
        if self.cls is None:
            raise UnknownConnector(f"connector type {self.name!r} is disabled: {self.disabled_reason}")
        return self.cls.config_model


def plugins() -> dict[str, Plugin]:
    found: dict[str, Plugin] = {}
    for ep in entry_points(group=GROUP):
        try:
            cls = ep.load()
        except ImportError as exc:
            found[ep.name] = Plugin(ep.name, None, f"{type(exc).__name__}: {exc}")
            continue
        if not (isinstance(cls, type) and issubclass(cls, WebhookConnector | SourceConnector)):
            found[ep.name] = Plugin(ep.name, None, f"{ep.value} is not a WebhookConnector or SourceConnector")
            continue
        found[ep.name] = Plugin(ep.name, cls)
    return found


def get(name: str) -> Plugin:
    plugin = plugins().get(name)
    if plugin is None:
        raise UnknownConnector(f"unknown connector type {name!r}; known: {', '.join(sorted(plugins())) or 'none'}")
    return plugin


def config_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of a connector type's configuration (served to tenant admins by the API)."""
    return get(name).config_model.model_json_schema()
