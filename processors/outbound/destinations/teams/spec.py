"""What a Teams subscription holds: the Workflows / incoming-webhook URL (a secret: whoever has it can post into the
channel), and optionally the catalog's address for links and whether incidents are sent."""

from __future__ import annotations

from typing import ClassVar

from pydantic import AnyHttpUrl, SecretStr, field_validator

from control.subscriptions.destinations import DestinationConfig, DestinationSecrets, DestinationSpec, https_url


class TeamsConfig(DestinationConfig):
    # Where people open the asset (the metalake API's public address); no link to the asset without it.
    catalog_url: AnyHttpUrl | None = None
    # Monte Carlo incidents (opened, updated, resolved) as cards too.
    incidents: bool = True


class TeamsSecrets(DestinationSecrets):
    # The URL carries its own signature (``sig=`` of a Workflows trigger): it is the credential, sealed at rest, and
    # only ever sent over https (plain http only to a loopback test receiver the runtime allowlists).
    webhook_url: SecretStr

    @field_validator("webhook_url")
    @classmethod
    def _https_url(cls, value: SecretStr) -> SecretStr:
        # Messages say what is wrong in words and never repeat the value: it is a secret.
        https_url(value.get_secret_value())
        return value


class TeamsSpec(DestinationSpec):
    name: ClassVar[str] = "teams"
    config_model: ClassVar[type[DestinationConfig]] = TeamsConfig
    secrets_model: ClassVar[type[DestinationSecrets]] = TeamsSecrets
    implementation: ClassVar[str] = "processors.outbound.destinations.teams.destination:TeamsDestination"
