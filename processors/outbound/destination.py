"""The one interface every outbound destination implements, and the registry that finds them by name.

A destination decides whether it wants a change (``accepts``) and delivers it (``deliver``), using the ledger for
every external side effect so a redelivered change never posts twice. It signals failures by raising
:class:`RetryableDelivery` (the runtime retries, honouring ``retry_after``) or :class:`PermanentDelivery` (straight to
the DLQ). Plugins are registered under the ``metalake.outbound`` entry-point group and looked up by name only
(:class:`metalake.plugins.PluginRegistry`: one that fails to load is disabled with its reason, the others run).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from metalake.events.changes import Change
from metalake.plugins import PluginRegistry
from metalake.settings import Settings
from processors.outbound.ssrf import AddressGuard

if TYPE_CHECKING:
    from processors.outbound.ledger import LedgerScope
    from processors.outbound.subscriptions import Subscription

GROUP = "metalake.outbound"


class DestinationConfig(BaseModel):
    """Base of a destination's (non-secret) configuration: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class DestinationSecrets(BaseModel):
    """Base of a destination's write-only secrets (``SecretStr`` fields)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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
    """What a destination gets from the runtime: settings and the SSRF guard for URLs tenants configure."""

    settings: Settings
    guard: AddressGuard


class Destination(ABC):
    """A kind of outbound destination. Instances live as long as the runtime; they hold only clients (caches)."""

    name: ClassVar[str]
    config_model: ClassVar[type[DestinationConfig]]
    secrets_model: ClassVar[type[DestinationSecrets]]
    # Lower runs first for one change: Jira before Slack, so a new ticket is linked into the thread at once.
    order: ClassVar[int] = 50

    def __init__(self, env: DestinationEnv) -> None:
        self.env = env

    @abstractmethod
    def accepts(self, change: Change, subscription: Subscription) -> bool: ...

    @abstractmethod
    def deliver(self, change: Change, subscription: Subscription, ledger: LedgerScope) -> DeliveryResult: ...

    @classmethod
    def merge_secrets(cls, stored: Mapping[str, str], update: Mapping[str, str]) -> dict[str, str]:
        """The secrets to store when ``update`` is written over ``stored`` (webhooks keep the previous key)."""
        return {**stored, **update}

    def config(self, subscription: Subscription) -> Any:
        return self.config_model.model_validate(subscription.config)


REGISTRY: PluginRegistry[type[Destination]] = PluginRegistry(GROUP, (Destination,))


def destination_classes() -> dict[str, type[Destination]]:
    """The enabled destination types by name (a disabled one is logged when the group is scanned)."""
    return REGISTRY.enabled()


def load_destinations(env: DestinationEnv) -> dict[str, Destination]:
    return {name: cls(env) for name, cls in destination_classes().items()}
