"""What a Jira subscription holds: the server, the account, the project and the tags that open issues; an API token."""

from __future__ import annotations

from typing import ClassVar

from pydantic import AnyHttpUrl, Field, SecretStr

from control.subscriptions.destinations import DestinationConfig, DestinationSecrets, DestinationSpec


class JiraConfig(DestinationConfig):
    server: AnyHttpUrl
    email: str = Field(min_length=3, max_length=254)
    project: str = Field(min_length=1, max_length=32, pattern=r"^[A-Z][A-Z0-9_]*$")
    issue_type: str = Field(default="Task", min_length=1, max_length=64)
    # The tags that open an issue (case-insensitive); other tags are not Jira's business.
    tags: tuple[str, ...] = Field(default=("PII", "GDPR"), min_length=1, max_length=20)
    labels: tuple[str, ...] = Field(default=("metalake",), max_length=10)
    # An issue per Monte Carlo incident and affected asset too (opened or updated opens it, resolved closes it).
    incidents: bool = True
    # Where people open the asset (the metalake API's public address): an incident's issue links it.
    catalog_url: AnyHttpUrl | None = None


class JiraSecrets(DestinationSecrets):
    api_token: SecretStr = Field(min_length=1, max_length=512)


class JiraSpec(DestinationSpec):
    name: ClassVar[str] = "jira"
    config_model: ClassVar[type[DestinationConfig]] = JiraConfig
    secrets_model: ClassVar[type[DestinationSecrets]] = JiraSecrets
    implementation: ClassVar[str] = "processors.outbound.destinations.jira.destination:JiraDestination"
    endpoint_fields: ClassVar[tuple[str, ...]] = ("server",)
