"""Which metalake tables a Monte Carlo delivery is about: Monte Carlo identifiers -> asset URNs.

Each ``payload.event_list[i]`` names its table in the first of these ways that yields one (later ones are not read):

1. ``mcon``: ``MCON++{account}++{warehouse_uuid}++table++{full_table_id}`` (object type ``table`` or ``view``);
2. ``full_table_id`` (``<database>:<schema>.<table>``), in the warehouse ``warehouse_uuid`` if the item has one;
3. ``payload.group_id`` (``<database>:<schema>``) + ``table_name``: Monte Carlo's documented anomaly shape;
4. ``rule.comparisons[j]``: its ``mcon`` or ``full_table_id`` (+ ``warehouse_uuid``): custom-rule breaches, whose
   ``table_name`` is null. Every comparison that names a table counts.

A warehouse UUID picks the URN's platform and instance from the config; without one the config's default is used; a
UUID the config does not map raises :class:`InvalidPayload` (never a guess). A ``full_table_id`` splits at the first
``:`` and then the first ``.``, so a table name may hold dots but a schema name may not (Monte Carlo does not quote).
Malformed identifiers are skipped, not errors: the next way may still name the table.

Tables are deduplicated per delivery (first appearance wins, so the output order is stable). A delivery in which no
item names a table raises :class:`InvalidPayload` with field ``payload/event_list``.
"""

from __future__ import annotations

from dataclasses import dataclass

from connectors.montecarlo.config import MonteCarloConfig
from connectors.montecarlo.payloads import Envelope, IncidentEvent
from control.connectors.plugin import InvalidPayload
from metalake.urn import InvalidUrn, asset_urn

SUMMARY_MAX = 512
_MCON_TABLE_TYPES = frozenset({"table", "view"})


@dataclass(frozen=True)
class TableRef:
    """A table named by one event_list item, before deduplication."""

    urn: str
    full_table_id: str
    mcon: str | None
    table_name: str | None
    summary: str | None


def clean_text(value: str) -> str:
    """``value`` with lone surrogates (JSON ``"\\ud800"``) replaced: they cannot be encoded as UTF-8 for Kafka."""
    return value.encode("utf-8", "replace").decode("utf-8")


def split_full_table_id(full_table_id: str) -> tuple[str, str, str] | None:
    """``db:schema.table`` -> ``(db, schema, table)``, or None if a part is missing or blank."""
    database, colon, rest = full_table_id.partition(":")
    schema, dot, table = rest.partition(".")
    parts = (database, schema, table)
    if not (colon and dot) or any(not part.strip() for part in parts):
        return None
    return parts


def split_mcon(mcon: str) -> tuple[str, str] | None:
    """A table MCON -> ``(warehouse_uuid, full_table_id)``, or None if it is not one."""
    parts = mcon.split("++", 4)
    if len(parts) != 5 or parts[0] != "MCON" or parts[3] not in _MCON_TABLE_TYPES or not parts[2].strip():
        return None
    return parts[2], parts[4]


def _summary(event: IncidentEvent) -> str | None:
    text = event.event_details or (event.rule.description if event.rule is not None else None)
    if text is None or not text.strip():
        return None
    text = clean_text(text.strip())
    return text if len(text) <= SUMMARY_MAX else text[: SUMMARY_MAX - 1] + "…"


class _Resolver:
    """Turns identifiers into :class:`TableRef` for one delivery; ``field`` arguments name the payload location."""

    def __init__(self, config: MonteCarloConfig, event: IncidentEvent) -> None:
        self.config = config
        self.event = event
        self.summary = _summary(event)

    def by_full_table_id(
        self, full_table_id: str | None, warehouse_uuid: str | None, field: str, mcon: str | None = None
    ) -> TableRef | None:
        parts = split_full_table_id(full_table_id) if full_table_id else None
        if not full_table_id or parts is None:
            return None  # not named this way, or malformed: the caller tries the next way
        uuid = warehouse_uuid.strip() if warehouse_uuid is not None and warehouse_uuid.strip() else None
        target = self.config.target_for(uuid)
        if target is None:
            raise InvalidPayload(f"{field}: the warehouse is not in this connector's warehouses map", field)
        try:
            urn = asset_urn(target.platform, target.instance, *(clean_text(part) for part in parts))
        except InvalidUrn as exc:  # a defensive net: split_full_table_id already refuses blank parts
            raise InvalidPayload(f"{field}: not a valid table identifier ({exc})", field) from None
        return TableRef(urn, clean_text(full_table_id), mcon and clean_text(mcon), self._table_name(), self.summary)

    def by_mcon(self, mcon: str | None, field: str) -> TableRef | None:
        split = split_mcon(mcon) if mcon else None
        return None if split is None else self.by_full_table_id(split[1], split[0], field, mcon)

    def _table_name(self) -> str | None:
        return clean_text(self.event.table_name) if self.event.table_name is not None else None


def _item_tables(config: MonteCarloConfig, group_id: str | None, event: IncidentEvent, field: str) -> list[TableRef]:
    resolver = _Resolver(config, event)
    by_group = f"{group_id}.{event.table_name}" if group_id and event.table_name else None
    # ``or`` stops at the first way that names the table: later ways are not read (an unmapped warehouse raises).
    named = (
        resolver.by_mcon(event.mcon, f"{field}/mcon")
        or resolver.by_full_table_id(event.full_table_id, event.warehouse_uuid, f"{field}/warehouse_uuid")
        or resolver.by_full_table_id(by_group, event.warehouse_uuid, f"{field}/warehouse_uuid")
    )
    if named is not None:
        return [named]
    refs: list[TableRef] = []
    comparisons = event.rule.comparisons if event.rule is not None and event.rule.comparisons else []
    for j, comparison in enumerate(comparisons):
        at = f"{field}/rule/comparisons/{j}"
        ref = resolver.by_mcon(comparison.mcon, f"{at}/mcon") or resolver.by_full_table_id(
            comparison.full_table_id, comparison.warehouse_uuid, f"{at}/warehouse_uuid"
        )
        if ref is not None:
            refs.append(ref)
    return refs


def affected_tables(envelope: Envelope, config: MonteCarloConfig) -> list[TableRef]:
    """The distinct tables of a delivery, in order of first appearance; the first summary found for a table wins."""
    group_id = envelope.payload.group_id if envelope.payload is not None else None
    found: dict[str, TableRef] = {}
    for i, event in enumerate(envelope.events):
        for ref in _item_tables(config, group_id, event, f"payload/event_list/{i}"):
            first = found.get(ref.urn)
            if first is None:
                found[ref.urn] = ref
            elif first.summary is None and ref.summary is not None:
                found[ref.urn] = TableRef(first.urn, first.full_table_id, first.mcon, first.table_name, ref.summary)
    if not found:
        raise InvalidPayload(
            "no item of payload/event_list names a table (mcon, full_table_id, group_id + table_name, or a custom "
            "rule's comparisons)",
            "payload/event_list",
        )
    return list(found.values())
