"""Connector plugins, registered by name through the ``metalake.connectors`` entry-point group.

A thin use of the kernel's :class:`metalake.plugins.PluginRegistry`: lookup by registered name only, a plugin that
fails to import (or is not a connector class) is listed as disabled with its reason, the group is scanned once.
Both the admin API (types and their configuration schemas) and the worker (running them) look plugins up here; the
plugin modules are imported only when the group is scanned, so neither imports the other.
"""

from __future__ import annotations

from typing import Any

from control.connectors.plugin import SourceConnector, WebhookConnector
from metalake import plugins as kernel

GROUP = "metalake.connectors"

ConnectorClass = type[WebhookConnector[Any, Any]] | type[SourceConnector[Any]]
Plugin = kernel.Plugin[ConnectorClass]

REGISTRY: kernel.PluginRegistry[ConnectorClass] = kernel.PluginRegistry(GROUP, (WebhookConnector, SourceConnector))


def plugins() -> dict[str, Plugin]:
    """Every connector type, enabled or disabled."""
    return REGISTRY.plugins()


def get(name: str) -> ConnectorClass:
    """The class of an enabled connector type; :class:`metalake.plugins.UnknownPlugin` if unknown or disabled."""
    return REGISTRY.get(name)


def config_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of a connector type's configuration (served to tenant admins by the API)."""
    return get(name).config_model.model_json_schema()
