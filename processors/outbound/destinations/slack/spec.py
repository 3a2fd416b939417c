"""What a Slack subscription holds: a channel (and, for tests, a base URL), whether incidents are sent, the
catalog's address for links, and a bot token."""

from __future__ import annotations

from typing import ClassVar

from pydantic import AnyHttpUrl, Field, SecretStr

from control.subscriptions.destinations import DestinationConfig, DestinationSecrets, DestinationSpec


class SlackConfig(DestinationConfig):
    channel: str = Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_#-]+$")
    # Only honoured when settings.outbound.allow_base_url_override is on (tests point it at a local server).
    base_url: str | None = Field(default=None, max_length=512)
    # Monte Carlo incidents (opened, updated, resolved), one thread per incident and affected asset.
    incidents: bool = True
    # Where people open the asset (the metalake API's public address): an incident's first message links it.
    catalog_url: AnyHttpUrl | None = None


class SlackSecrets(DestinationSecrets):
    token: SecretStr = Field(min_length=1, max_length=512)


class SlackSpec(DestinationSpec):
    name: ClassVar[str] = "slack"
    config_model: ClassVar[type[DestinationConfig]] = SlackConfig
    secrets_model: ClassVar[type[DestinationSecrets]] = SlackSecrets
    implementation: ClassVar[str] = "processors.outbound.destinations.slack.destination:SlackDestination"
    endpoint_fields: ClassVar[tuple[str, ...]] = ("base_url",)
