"""Validation of an event's ``data`` against its type's JSON Schema."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

import fastjsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from metalake.events.registry import spec_for


class InvalidData(ValueError):
    """``data`` does not match the schema of its event type; ``field`` names the offending location."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@cache
def _validator(event_type: str) -> Draft202012Validator:
    schema = spec_for(event_type).schema
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@cache
def _fast(event_type: str) -> Callable[[Any], Any]:
    """The schema compiled to Python (about ten times faster than interpreting it), for the common, valid case.

    fastjsonschema implements draft 7; our schemas use only keywords whose meaning is the same in 2020-12 (type,
    properties, required, additionalProperties, pattern, enum, bounds, items), so the two agree.
    """
    schema = {k: v for k, v in spec_for(event_type).schema.items() if k not in ("$schema", "$id")}
    compiled: Callable[[Any], Any] = fastjsonschema.compile(schema)
    return compiled


def validate_data(event_type: str, data: Mapping[str, Any]) -> None:
    """Raise :class:`UnknownEventType` or :class:`InvalidData` (with the field at fault)."""
    try:
        _fast(event_type)(data)
        return
    except fastjsonschema.JsonSchemaException:
        pass  # the reference validator below decides, and words the error
    error = best_match(_validator(event_type).iter_errors(data))
    if error is None:
        return
    field = "/".join(str(p) for p in error.absolute_path) or "(root)"
    if error.validator in ("required", "additionalProperties"):
        # These messages name only property names, which come from the schema or the sender's keys.
        detail = error.message
    else:
        # Other messages quote the value, and values may be personal data: name the rule instead.
        rule = repr(error.validator_value)
        detail = f"must satisfy {error.validator}={rule[:120]}"
    raise InvalidData(f"data/{field}: {detail}", field)
