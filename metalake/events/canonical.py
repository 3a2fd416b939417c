"""URNs in events in their canonical spelling (``metalake.urn.canonical_urn``).

The schemas check URNs by pattern only (``^urn:metalake:<platform>:<instance>/<segment>...``), which admits many
spellings of one asset (``jane doe's orders`` and ``jane%20doe%27s%20orders``). Rows are compared by exact value
(the erase, the catalog's lookups, lineage), so every event is rewritten to the canonical spelling where it is built
(``new_event``), received (the ingest API, the connectors' pipeline) and decoded (``decode_record``, which the
streaming job uses): the fields of ``data`` whose schema is a URN pattern, or a list of them, and the subject.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from metalake.events.registry import spec_for
from metalake.events.validation import InvalidData
from metalake.urn import InvalidUrn, canonical_urn

_URN_PATTERN = "^urn:metalake:"


def _is_urn(schema: Any) -> bool:  # noqa: ANN401
    return isinstance(schema, dict) and str(schema.get("pattern", "")).startswith(_URN_PATTERN)


@cache
def urn_fields(event_type: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The top-level fields of the type's ``data`` that hold a URN: (single URNs, lists of URNs)."""
    single: list[str] = []
    lists: list[str] = []
    for name, prop in spec_for(event_type).schema.get("properties", {}).items():
        if _is_urn(prop):
            single.append(name)
        elif isinstance(prop, dict) and prop.get("type") == "array" and _is_urn(prop.get("items")):
            lists.append(name)
    return tuple(single), tuple(lists)


def _canonical(value: Any, field: str) -> Any:  # noqa: ANN401
    if not isinstance(value, str):
        return value  # the schema validation refuses it; nothing to canonicalise
    try:
        return canonical_urn(value)
    except InvalidUrn:
        # The value is not quoted: it may be personal data.
        raise InvalidData(f"data/{field}: not a metalake asset URN", field) from None


def canonical_data(event_type: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with every URN field in canonical form (a copy; unchanged fields are the same objects). Call it on
    data that passed :func:`metalake.events.validation.validate_data`; raises :class:`InvalidData` for a URN field
    the pattern admits but the URN parser does not."""
    single, lists = urn_fields(event_type)
    out = dict(data)
    for name in single:
        if name in out:
            out[name] = _canonical(out[name], name)
    for name in lists:
        values = out.get(name)
        if isinstance(values, list):
            out[name] = [_canonical(v, f"{name}/{i}") for i, v in enumerate(values)]
    return out


def canonical_subject(subject: str | None) -> str | None:
    """The subject in canonical form when it is an asset URN; any other subject as it is."""
    if subject is None:
        return None
    try:
        return canonical_urn(subject)
    except InvalidUrn:
        return subject
