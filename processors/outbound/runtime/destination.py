"""The one interface every outbound destination implements, and the runtime's view of the destination registry.

A destination decides whether it wants a change (``accepts``) and delivers it (``deliver``), using the ledger for
every external side effect so a redelivered change never posts twice. It signals failures by raising
:class:`RetryableDelivery` (the runtime retries, honouring ``retry_after``) or :class:`PermanentDelivery` (straight to
the DLQ). Destination kinds are registered once, as specs in the ``metalake.outbound`` entry-point group
(:mod:`control.subscriptions.destinations`); the runtime loads the class each enabled spec names through a
:class:`metalake.plugins.PluginRegistry` fed from those specs, so the names exist once and a class that fails to load
(its SDK missing) is disabled with its reason while the others run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from catalog.changes import Change
from control.subscriptions.destinations import GROUP, DestinationSpec, destination_specs
from metalake.net.ssrf import AddressGuard
from metalake.plugins import PluginRegistry
from processors.outbound.settings import OutboundProcessSettings

if TYPE_CHECKING:
    from control.subscriptions.store import Subscription
    from processors.outbound.runtime.catalog import Catalog
    from processors.outbound.runtime.ledger import LedgerScope


@dataclass(frozen=True)
class DeliveryResult:
    status: Literal["delivered", "skipped"]
    detail: str = ""
    refs: Mapping[str, str] = field(default_factory=dict)


class DeliveryError(Exception):
    """Base of delivery failures. Messages name the destination's answer, never payload values or secrets."""


class RetryableDelivery(DeliveryError):
    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class PermanentDelivery(DeliveryError):
    pass


@dataclass(frozen=True)
class DestinationEnv:
    """What a destination gets from the runtime: settings, the SSRF guard for URLs tenants configure, and reads of
    the tenant's catalog (an incident's owners and downstream impact; ``None`` where a caller has no MongoDB)."""

    settings: OutboundProcessSettings
    guard: AddressGuard
    catalog: Catalog | None = None


class Destination(ABC):
    """A kind of outbound destination. Instances live as long as the runtime; they hold only clients (caches)."""

    # What the control plane validates (name, config and secrets models); its ``implementation`` names this class.
    spec: ClassVar[type[DestinationSpec]]
    # Lower runs first for one change: Jira before Slack, so a new ticket is linked into the thread at once.
    order: ClassVar[int] = 50

    def __init__(self, env: DestinationEnv) -> None:
        self.env = env

    @abstractmethod
    def accepts(self, change: Change, subscription: Subscription) -> bool: ...

    @abstractmethod
    def deliver(self, change: Change, subscription: Subscription, ledger: LedgerScope) -> DeliveryResult: ...

    def config(self, subscription: Subscription) -> Any:  # noqa: ANN401
        return self.spec.config_model.model_validate(subscription.config)


def _implementations(group: str) -> list[EntryPoint]:
    # The spec registry's names, each pointing at the class its spec names: no second list of destinations.
    return [EntryPoint(name, spec.implementation, group) for name, spec in sorted(destination_specs().items())]


REGISTRY: PluginRegistry[type[Destination]] = PluginRegistry(GROUP, (Destination,), entry_points=_implementations)


def destination_classes() -> dict[str, type[Destination]]:
    """The enabled destination types by name (a disabled one is logged when the group is scanned)."""
    return REGISTRY.enabled()


def load_destinations(env: DestinationEnv) -> dict[str, Destination]:
    return {name: cls(env) for name, cls in destination_classes().items()}
