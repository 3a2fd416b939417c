"""Configuration of a Monte Carlo connector instance: where Monte Carlo's tables live in metalake's URN scheme.

Monte Carlo names a table by ``<database>:<schema>.<table>`` (``full_table_id``) and, in an MCON or a custom rule, by
the UUID of the warehouse it monitors. A metalake URN also needs a platform and an instance, so each warehouse UUID
maps to one ``(platform, instance)``; payloads that name no warehouse (the common ``group_id`` + ``table_name`` case)
use the default. A warehouse UUID that is not mapped is an error, not a fallback: guessing would attach an incident
to the wrong asset. Secrets are not part of this model: the runtime passes them to ``verify`` separately.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from control.connectors.plugin import ConnectorConfig
from metalake.urn import AssetUrn, InvalidUrn


def _check_target(platform: str, instance: str) -> None:
    # The URN module owns what a platform and an instance may be; a throwaway URN asks it.
    try:
        AssetUrn(platform, instance, ("_",))
    except InvalidUrn as exc:
        raise ValueError(str(exc)) from None


class WarehouseTarget(BaseModel):
    """Where one Monte Carlo warehouse's tables live: ``urn:metalake:<platform>:<instance>/...``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    platform: str = Field(description="URN platform, e.g. snowflake or bigquery")
    instance: str = Field(description="URN instance: which account, server or project of that platform")

    @model_validator(mode="after")
    def _valid(self) -> WarehouseTarget:
        _check_target(self.platform, self.instance)
        return self


class MonteCarloConfig(ConnectorConfig):
    """The default target for payloads without a warehouse, and ``warehouses`` by Monte Carlo warehouse UUID."""

    default_platform: str = Field(description="URN platform of tables named without a warehouse (group_id + table)")
    default_instance: str = Field(description="URN instance of tables named without a warehouse")
    warehouses: dict[str, WarehouseTarget] = Field(
        default_factory=dict, description="Monte Carlo warehouse UUID -> where its tables live in metalake"
    )

    @field_validator("warehouses")
    @classmethod
    def _normalise_uuids(cls, value: dict[str, WarehouseTarget]) -> dict[str, WarehouseTarget]:
        # UUIDs compare case-insensitively; payloads are looked up with the same normalisation.
        out = {normalise_uuid(key): target for key, target in value.items()}
        if len(out) != len(value):
            raise ValueError("warehouse UUIDs must be unique regardless of case")
        return out

    @model_validator(mode="after")
    def _valid_default(self) -> MonteCarloConfig:
        _check_target(self.default_platform, self.default_instance)
        return self

    @property
    def default_target(self) -> WarehouseTarget:
        return WarehouseTarget(platform=self.default_platform, instance=self.default_instance)

    def target_for(self, warehouse_uuid: str | None) -> WarehouseTarget | None:
        """The target of a warehouse (the default if ``warehouse_uuid`` is None); None if the UUID is not mapped."""
        if warehouse_uuid is None:
            return self.default_target
        return self.warehouses.get(normalise_uuid(warehouse_uuid))


def normalise_uuid(value: str) -> str:
    return value.strip().lower()
