"""What a webhook subscription holds: the URL, and the signing key (two during a rotation)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pydantic import AnyHttpUrl, Field, SecretStr, field_validator

from control.subscriptions.destinations import DestinationConfig, DestinationSecrets, DestinationSpec, https_url


class WebhookConfig(DestinationConfig):
    # https: the signed body is the tenant's catalog news, and receivers often put a token in the URL.
    url: AnyHttpUrl

    @field_validator("url")
    @classmethod
    def _https(cls, value: AnyHttpUrl) -> AnyHttpUrl:
        https_url(str(value))
        return value


class WebhookSecrets(DestinationSecrets):
    """The signing key, and during a rotation the previous one (both sign every delivery until it is dropped)."""

    key_id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    secret: SecretStr = Field(min_length=16, max_length=512)
    previous_key_id: str | None = Field(default=None, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    previous_secret: SecretStr | None = Field(default=None, min_length=16, max_length=512)


class WebhookSpec(DestinationSpec):
    name: ClassVar[str] = "webhook"
    config_model: ClassVar[type[DestinationConfig]] = WebhookConfig
    secrets_model: ClassVar[type[DestinationSecrets]] = WebhookSecrets
    implementation: ClassVar[str] = "processors.outbound.destinations.webhook.destination:WebhookDestination"
    endpoint_fields: ClassVar[tuple[str, ...]] = ("url",)

    @classmethod
    def merge_secrets(cls, stored: Mapping[str, str], update: Mapping[str, str]) -> dict[str, str]:
        # A new key id starts a rotation: the stored key keeps signing as the previous one until the admin writes
        # the current key again (or a new previous key) to end the overlap.
        merged = {**stored, **update}
        new_id, old_id = update.get("key_id"), stored.get("key_id")
        if new_id and old_id and new_id != old_id and "previous_key_id" not in update:
            merged["previous_key_id"], merged["previous_secret"] = old_id, stored.get("secret", "")
        elif new_id and new_id == old_id and "previous_key_id" not in update:
            merged.pop("previous_key_id", None)
            merged.pop("previous_secret", None)
        return merged
