"""What a Teams subscription holds: the Workflows / incoming-webhook URL (a secret: whoever has it can post into the
channel), and optionally the catalog's address for links and whether incidents are sent."""

from __future__ import annotations

from typing import ClassVar
from urllib.parse import urlsplit

from pydantic import AnyHttpUrl, Field, SecretStr, field_validator

from control.subscriptions.destinations import DestinationConfig, DestinationSecrets, DestinationSpec


class TeamsConfig(DestinationConfig):
    # Where people open the asset (the metalake API's public address); no link to the asset without it.
    catalog_url: AnyHttpUrl | None = None
    # Monte Carlo incidents (opened, updated, resolved) as cards too.
    incidents: bool = True


class TeamsSecrets(DestinationSecrets):
    # The URL carries its own signature (``sig=`` of a Workflows trigger): it is the credential, sealed at rest.
    webhook_url: SecretStr = Field(min_length=12, max_length=2048)

    @field_validator("webhook_url")
    @classmethod
    def _http_url(cls, value: SecretStr) -> SecretStr:
        # Messages name the rule only: the value is a secret.
        parts = urlsplit(value.get_secret_value())
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError("must be an http(s) URL with a host")
        if parts.username or parts.password:
            raise ValueError("must not carry credentials")
        return value


class TeamsSpec(DestinationSpec):
    name: ClassVar[str] = "teams"
    config_model: ClassVar[type[DestinationConfig]] = TeamsConfig
    secrets_model: ClassVar[type[DestinationSecrets]] = TeamsSecrets
    implementation: ClassVar[str] = "processors.outbound.destinations.teams.destination:TeamsDestination"
