"""What a Freshdesk subscription holds: the helpdesk's domain, the requester the tickets are filed for, which tags
open tickets, and an API key."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AnyHttpUrl, Field, SecretStr, StringConstraints

from control.subscriptions.destinations import DestinationConfig, DestinationSecrets, DestinationSpec


class FreshdeskConfig(DestinationConfig):
    # ``acme`` for https://acme.freshdesk.com.
    domain: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")
    # Only honoured when settings.outbound.allow_base_url_override is on (tests point it at a local server).
    base_url: str | None = Field(default=None, max_length=512)
    # The ticket's requester (Freshdesk creates the contact if it does not exist).
    email: str = Field(min_length=3, max_length=254, pattern=r"^[^@\s]+@[^@\s]+$")
    # The tags that open a ticket (case-insensitive); other tags are not the helpdesk's business.
    tags: tuple[str, ...] = Field(default=("PII", "GDPR"), min_length=1, max_length=20)
    # A ticket per Monte Carlo incident too (opened or updated opens it, resolved resolves it).
    incidents: bool = True
    # 1 low, 2 medium, 3 high, 4 urgent.
    priority: int = Field(default=2, ge=1, le=4)
    # The status a ticket gets when its tag is removed or its incident resolved: 4 resolved, 5 closed.
    done_status: Literal[4, 5] = 4
    group_id: int | None = Field(default=None, ge=1)
    # Added to every ticket besides its dedup tag (Freshdesk tags are at most 32 characters).
    ticket_tags: tuple[Annotated[str, StringConstraints(min_length=1, max_length=32)], ...] = Field(
        default=("metalake",), max_length=10
    )
    catalog_url: AnyHttpUrl | None = None


class FreshdeskSecrets(DestinationSecrets):
    api_key: SecretStr = Field(min_length=1, max_length=512)


class FreshdeskSpec(DestinationSpec):
    name: ClassVar[str] = "freshdesk"
    config_model: ClassVar[type[DestinationConfig]] = FreshdeskConfig
    secrets_model: ClassVar[type[DestinationSecrets]] = FreshdeskSecrets
    implementation: ClassVar[str] = "processors.outbound.destinations.freshdesk.destination:FreshdeskDestination"
    endpoint_fields: ClassVar[tuple[str, ...]] = ("domain", "base_url")
