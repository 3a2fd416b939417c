"""What a kind of outbound destination accepts: its name, its configuration model and its secrets model (a *spec*).

The admin API validates a subscription with its destination's spec; the outbound runtime delivers with the
destination class the spec names. One registry holds the destination kinds: the ``metalake.outbound`` entry-point
group names each kind's spec class (:data:`SPECS`), so the API loads no vendor SDK and the names exist once. A spec's
``implementation`` (``"module:Class"``, written by the plugin's author, never by a tenant) is what the runtime loads
through its own view of the same names (``processors.outbound.runtime.destination.REGISTRY``). A spec module imports
pydantic and this package only: the API process loads it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, SecretStr

from metalake.plugins import PluginRegistry

GROUP = "metalake.outbound"


URL_MAX = 2048


def https_url(url: str) -> str:
    """``url`` if it is fit to carry a credential (a URL that is one, like a Teams trigger's ``sig=``, or a request
    that carries one): ``https`` with a host and no user info, of at most ``URL_MAX`` characters; plain ``http`` only
    to a loopback host (a local test receiver: the outbound runtime then also requires its address on
    ``outbound.ssrf_allow``, :func:`metalake.net.pinned.refuse_plain_http`). Raises ``ValueError`` whose message says
    what is wrong in words and never repeats the value (it may be a secret)."""
    if len(url) > URL_MAX:
        raise ValueError(f"must be a URL of at most {URL_MAX} characters")
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        raise ValueError("must be an https URL (https://host/path)") from None
    if parts.scheme not in ("https", "http") or not host:
        raise ValueError("must be an https URL with a host (https://host/path)")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not carry user credentials (user:password@)")
    if parts.scheme == "http" and not _loopback(host):
        raise ValueError(
            "must be https: plain http would send the credential in clear (http only to a loopback test receiver)"
        )
    return url


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class DestinationConfig(BaseModel):
    """Base of a destination's (non-secret) configuration: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class DestinationSecrets(BaseModel):
    """Base of a destination's write-only secrets (``SecretStr`` fields)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class DestinationSpec:
    """A kind of destination as the control plane knows it. Subclasses set the class attributes."""

    name: ClassVar[str]
    config_model: ClassVar[type[DestinationConfig]]
    secrets_model: ClassVar[type[DestinationSecrets]]
    # The runtime's destination class, "module:Class": loaded by the outbound runtime only (it imports the SDK).
    implementation: ClassVar[str]
    # Configuration fields that say where deliveries (and so the secrets) go: changing one requires every stored
    # secret again, so a write-only secret is never handed to a host its owner did not send it to.
    endpoint_fields: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def merge_secrets(cls, stored: Mapping[str, str], update: Mapping[str, str]) -> dict[str, str]:
        """The secrets to store when ``update`` is written over ``stored`` (webhooks keep the previous key)."""
        return {**stored, **update}

    @classmethod
    def config(cls, config: Mapping[str, Any]) -> DestinationConfig:
        """``config`` validated; raises ``pydantic.ValidationError``."""
        return cls.config_model.model_validate(dict(config))

    @classmethod
    def secrets(cls, stored: Mapping[str, str], update: Mapping[str, str]) -> dict[str, str]:
        """The plain values to store after merging ``update`` into ``stored``, validated; raises
        ``pydantic.ValidationError`` (whose messages name the rule, never the value)."""
        model = cls.secrets_model.model_validate(cls.merge_secrets(stored, update))
        out: dict[str, str] = {}
        for key, value in model:
            if isinstance(value, SecretStr):
                out[key] = value.get_secret_value()
            elif value is not None:
                out[key] = str(value)
        return out


SPECS: PluginRegistry[type[DestinationSpec]] = PluginRegistry(GROUP, (DestinationSpec,))


def destination_specs() -> dict[str, type[DestinationSpec]]:
    """The enabled destination kinds by name (a disabled one is logged when the group is scanned)."""
    return SPECS.enabled()
