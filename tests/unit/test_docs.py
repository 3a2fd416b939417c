"""docs/events.md keeps up with the registry: every type, every schema field, and examples that decode."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from metalake.events.envelope import decode_record
from metalake.events.registry import event_types, spec_for

DOC = Path(__file__).resolve().parents[2] / "docs" / "events.md"
NAMES = [spec.name for spec in event_types()]


def _section(name: str) -> str:
    text = DOC.read_text("utf-8")
    start = text.index(f"### `{name}`\n")
    end = text.find("\n### ", start + 1)
    return text[start : end if end != -1 else None]


@pytest.mark.parametrize("name", NAMES)
def test_every_field_is_listed(name: str) -> None:
    section = _section(name)
    schema = spec_for(name).schema
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \|[^|]*\| (yes|no) \|", section, re.MULTILINE)}
    assert rows == {field: ("yes" if field in schema["required"] else "no") for field in schema["properties"]}


EXAMPLE = re.compile(
    r"topic class \*\*(priority|bulk)\*\*[^\n]*:\n\n```text\nkey: +(.*)\nheaders:\n((?:  .*\n)+)value:\n  (.*)\n```"
)


@pytest.mark.parametrize("name", NAMES)
def test_examples_decode(name: str) -> None:
    examples = EXAMPLE.findall(_section(name))
    assert examples
    for topic_class, key, header_lines, value in examples:
        headers = [line.strip().split(None, 1) for line in header_lines.splitlines()]
        event = decode_record(key.encode(), value.encode(), [(n, v.encode()) for n, v in headers])
        assert event.type == name
        assert event.partitionkey == key
        assert spec_for(name).topic_class(event.data) == topic_class
