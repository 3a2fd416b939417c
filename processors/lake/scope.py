"""What a GDPR erase of one asset touches: the rows of each Delta table and the MongoDB documents. Pure.

URNs are validated and made canonical (``metalake.urn.canonical_urn``: percent-encoded ASCII segments); any valid
spelling names the asset. Rows written before every entry point canonicalised may hold another spelling of it: the
erase looks for those among the URNs the tenant's tables hold (``erase.stored_urns``) and erases them too
(``EraseTarget.spellings``, ``with_spellings``). Delta predicates compare sha256 hashes, so neither SQL quoting nor
the Delta log ever sees the URN.

A row goes when it names the URN anywhere, not only as its own subject: an edge's other end, a propagated tag's
origin or any hop of its path (its source or a step of its route is gone: like deleting the source, which removes
its propagations). The event fields that can hold a URN are read from the event schemas (``urn_fields``).

A dead letter (``_dlq``) is raw bytes that failed to decode, so no field is known to hold a URN: its key, value and
headers are searched for the URN's text (``raw_pattern``) by a read-only Spark filter, which the Delta log never
sees, and the rows found are deleted by their Kafka identity (``identity_predicate``), which names no URN.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from control.erased import PLAIN, UrnHasher
from metalake.events import event_types
from metalake.urn import InvalidUrn, canonical_urn
from processors.lake.errors import LakeUsageError


@dataclass(frozen=True)
class EraseTarget:
    """The URN to erase and whether its children (``urn + "/"`` prefixes: a table's columns) go with it."""

    tenant: str
    urn: str
    include_children: bool = False
    # Other spellings of the URN (or, with children, of a child) found stored: erased by exact value too.
    spellings: tuple[str, ...] = ()
    # The keyed hash records name the URN by (``control.erased``); without a key, the plain sha256.
    hasher: UrnHasher = PLAIN

    @property
    def values(self) -> tuple[str, ...]:
        """Every stored spelling to erase: the canonical URN first."""
        return (self.urn, *self.spellings)

    @property
    def platform_prefix(self) -> str:
        """``urn:metalake:<platform>:``, which every spelling of the URN starts with (the platform is lowercase
        ASCII: it has one spelling)."""
        return self.urn[: self.urn.index(":", len("urn:metalake:")) + 1]

    @property
    def child_prefix(self) -> str:
        return self.urn + "/"

    @property
    def target_hash(self) -> str:
        """The URN's keyed hash (HMAC under a key derived from the KEK): the audit trail proves which asset was erased
        to whoever holds the key and knows the URN, holds no name, and cannot be tested against guessed URNs."""
        return self.hasher.digest(self.urn)

    @property
    def raw_key(self) -> str:
        """The Kafka key publishers give events about the URN (``<tenant>:<urn>``), kept in ``_dlq.raw_key``."""
        return f"{self.tenant}:{self.urn}"


def erase_target(tenant: str, urn: str, include_children: bool = False, hasher: UrnHasher = PLAIN) -> EraseTarget:
    """Validate the URN (LakeUsageError with the parser's reason otherwise) and build the target for its canonical
    spelling (any valid spelling names the asset)."""
    try:
        canonical = canonical_urn(urn)
    except InvalidUrn as exc:
        raise LakeUsageError(f"invalid URN: {exc}") from None
    return EraseTarget(tenant, canonical, include_children, hasher=hasher)


def with_spellings(target: EraseTarget, stored: Iterable[str]) -> EraseTarget:
    """The target with every stored value that is another spelling of its URN (with children: of a child's URN)."""
    found: set[str] = set()
    for value in stored:
        if value in target.values:
            continue
        try:
            canonical = canonical_urn(value)
        except InvalidUrn:
            continue
        # A canonical child already goes by the prefix: only other spellings need their own match.
        mine = canonical == target.urn or (target.include_children and canonical.startswith(target.child_prefix))
        if mine and canonical != value:
            found.add(value)
    return EraseTarget(target.tenant, target.urn, target.include_children, tuple(sorted(found)), target.hasher)


def _sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _is(expr: str, values: tuple[str, ...], include_children: bool, prefix: str) -> str:
    """``expr`` equals one of ``values`` (or starts with ``prefix``), compared through sha256 so the predicate Delta
    records in the commit (``operationParameters``) names hashes, never an erased value."""
    if len(values) == 1:
        exact = f"sha2({expr}, 256) = '{_sha(values[0])}'"
    else:
        exact = f"sha2({expr}, 256) IN ({', '.join(repr(_sha(v)) for v in values)})"
    if not include_children:
        return exact
    return f"({exact} OR sha2(substring({expr}, 1, {len(prefix)}), 256) = '{_sha(prefix)}')"


_URN_PATTERN = "^urn:metalake:"


def _is_urn(schema: Any) -> bool:  # noqa: ANN401
    return isinstance(schema, dict) and str(schema.get("pattern", "")).startswith(_URN_PATTERN)


def urn_fields() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The top-level fields of event data that hold a URN, from every known event schema: (single URNs, lists of
    URNs), sorted. A new event type that names assets is covered by the erase without a change here."""
    single: set[str] = set()
    lists: set[str] = set()
    for spec in event_types():
        for name, prop in spec.schema.get("properties", {}).items():
            if _is_urn(prop):
                single.add(name)
            elif isinstance(prop, dict) and prop.get("type") == "array" and _is_urn(prop.get("items")):
                lists.add(name)
    return tuple(sorted(single)), tuple(sorted(lists))


def delta_predicates(target: EraseTarget) -> dict[str, str]:
    """Spark SQL DELETE predicates per Delta table name; they hold hashes only (see ``_is``).

    ``events``: the subject is the URN, or the event's data names it in any URN field (``urn_fields``: e.g. the
    ``upstream`` of an edge, the ``origin`` or a ``path`` hop of a propagated tag): those rows hold the URN too and
    the erase must leave no copy. ``propagated_tags``: the URN is the row's asset, its origin or a hop of its path.
    ``_dlq``: the record's Kafka key is ``<tenant>:<urn>`` (binary column; URNs are ASCII, so characters are bytes).
    """
    kids, prefix = target.include_children, target.child_prefix

    def on(expr: str) -> str:
        return _is(expr, target.values, kids, prefix)

    def any_of(array: str) -> str:
        # A null array (a field the event lacks) gives null: the row does not match.
        return f"exists({array}, x -> {on('x')})"

    single, lists = urn_fields()
    in_data = [
        *(on(f"get_json_object(data, '$.{f}')") for f in single),
        *(any_of(f"from_json(get_json_object(data, '$.{f}'), 'array<string>')") for f in lists),
    ]
    return {
        "events": " OR ".join([on("subject"), *in_data]),
        "assets": on("urn"),
        "classifications": on("urn"),
        "lineage_edges": f"{on('urn')} OR {on('upstream')}",
        "incidents": on("urn"),
        "propagated_tags": f"{on('urn')} OR {on('origin')} OR {any_of('path')}",
        "asset_edits": on("urn"),
        "_dlq": _is("raw_key", tuple(f"{target.tenant}:{v}" for v in target.values), kids, target.raw_key + "/"),
    }


def _mongo_match(field: str, target: EraseTarget) -> list[dict[str, Any]]:
    exact = target.urn if not target.spellings else {"$in": list(target.values)}
    out: list[dict[str, Any]] = [{field: exact}]
    if target.include_children:
        out.append({field: {"$regex": "^" + re.escape(target.child_prefix)}})
    return out


def mongo_filters(target: EraseTarget) -> dict[str, dict[str, Any]]:
    """MongoDB delete filters per collection: by ``_id`` and by the URN fields the projection stores (a filter on
    an array field such as ``path`` matches a document when any element matches)."""
    fields = {
        "assets": ("_id", "urn"),
        "classifications": ("urn",),
        "lineage": ("urn", "upstream"),
        "incidents": ("urn",),
        "propagated_tags": ("urn", "origin", "path"),
        "asset_edits": ("urn",),
    }
    return {
        collection: {"$or": [m for f in names for m in _mongo_match(f, target)]} for collection, names in fields.items()
    }


# Dead letters: the raw columns searched for the URN's text, and the columns that identify a row (its Kafka record).
RAW_COLUMNS = ("raw_key", "raw_value", "raw_headers")
DLQ_IDENTITY = ("kafka_topic", "kafka_partition", "kafka_offset")
# A character that continues a URN segment (percent-encoded ASCII): the URN followed by one is another name.
_NAME_CHAR = "A-Za-z0-9_%.~-"


class KafkaPosition(NamedTuple):
    """Where a dead letter's Kafka record was (the ``DLQ_IDENTITY`` columns); any part may be null in old rows."""

    topic: str | None
    partition: int | None
    offset: int | None


def raw_pattern(target: EraseTarget) -> str:
    """A Java (Spark ``rlike``) regex for the URN's text in raw bytes read as UTF-8: its slashes also JSON-escaped
    (``\\/``), not followed by a name character (a lookalike that only shares a prefix) nor, unless children go too,
    by a slash (a child's URN). For a read-only filter only: it spells the URN, so it must never reach a DELETE."""

    def spelled(value: str) -> str:
        return "\\\\?/".join(re.escape(part) for part in value.split("/"))

    stop = f"[{_NAME_CHAR}]" if target.include_children else f"[{_NAME_CHAR}]|\\\\?/"
    canonical = f"{spelled(target.urn)}(?!{stop})"
    if not target.spellings:
        return canonical
    # Another spelling may hold any character (a space, a quote): only the end of a JSON string or of the key ends it.
    others = [f'{spelled(value)}(?="|$)' for value in target.spellings]
    return f"(?:{'|'.join([canonical, *others])})"


def _literal(value: str | int | None) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def identity_predicate(rows: Iterable[KafkaPosition]) -> str | None:
    """A DELETE predicate for exactly these dead letters, by (topic, partition, offset): it names Kafka positions,
    never a URN. None for no rows. Null-safe, so a row without a position is matched by its nulls."""
    by_partition: dict[tuple[str | None, int | None], set[int | None]] = {}
    for row in rows:
        by_partition.setdefault((row.topic, row.partition), set()).add(row.offset)
    terms = []
    for (topic, partition), offsets in sorted(
        by_partition.items(), key=lambda kv: (kv[0][0] or "", -1 if kv[0][1] is None else kv[0][1])
    ):
        known = sorted(o for o in offsets if o is not None)
        at = [f"kafka_offset IN ({', '.join(map(str, known))})"] if known else []
        if None in offsets:
            at.append("kafka_offset IS NULL")
        where = at[0] if len(at) == 1 else f"({' OR '.join(at)})"
        terms.append(f"(kafka_topic <=> {_literal(topic)} AND kafka_partition <=> {_literal(partition)} AND {where})")
    return " OR ".join(terms) or None
