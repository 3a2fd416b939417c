"""The Python examples of docs/propagation.md run as written (their asserts are the expected output)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[4] / "docs" / "propagation.md"


def test_python_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text("utf-8"), re.DOTALL)
    assert blocks
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {})  # noqa: S102 - our own documentation


def test_the_settings_named_in_the_doc_exist() -> None:
    from processors.propagation.settings import PropagationSettings

    named = set(re.findall(r"`(max_depth|max_fanout|max_reached|time_budget_s)` \| ([0-9.]+) \|", DOC.read_text()))
    defaults = PropagationSettings()
    assert named == {(name, str(getattr(defaults, name))) for name, _ in named}
    assert len(named) == 4
