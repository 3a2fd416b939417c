"""The compiled validator (fast path) and the reference validator (jsonschema, 2020-12) agree on every verdict."""

from __future__ import annotations

import copy
from typing import Any

from jsonschema import Draft202012Validator

from metalake.events.registry import spec_for
from metalake.events.validation import _fast

WRONG_VALUES: list[Any] = [None, "text", "", 0, -1, 1.5, True, [], ["x"], {}, {"k": 1}, "x" * 3000, 2**64]


def _mutations(data: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key in data:
        removed = dict(data)
        del removed[key]
        out.append(removed)
        for value in WRONG_VALUES:
            changed = copy.deepcopy(data)
            changed[key] = value
            out.append(changed)
    out.append({**data, "unexpected": 1})
    return out


def _fast_ok(event_type: str, data: dict[str, Any]) -> bool:
    try:
        _fast(event_type)(data)
    except Exception:  # noqa: BLE001 - any rejection counts as "invalid" here
        return False
    return True


def test_both_validators_agree(examples: dict[str, dict[str, Any]]) -> None:
    for event_type, example in examples.items():
        _agree(event_type, example)


def _agree(event_type: str, example: dict[str, Any]) -> None:
    reference = Draft202012Validator(spec_for(event_type).schema)
    cases = [example, *_mutations(example)]
    disagreements = [case for case in cases if _fast_ok(event_type, case) != reference.is_valid(case)]
    assert (event_type, disagreements) == (event_type, [])
    assert _fast_ok(event_type, example)
