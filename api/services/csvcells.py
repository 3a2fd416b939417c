"""CSV cells that a spreadsheet shows as text, never runs as a formula (OWASP "CSV injection").

Excel, LibreOffice and Google Sheets evaluate a cell that starts with ``=``, ``+``, ``-`` or ``@`` (``=HYPERLINK(...)``,
``=WEBSERVICE(...)``, DDE ``=cmd|...``), and some strip a leading tab, carriage return or other control character
first. Every CSV metalake writes passes its text cells through :func:`text_cell`, which prefixes such a cell with
``'``: the spreadsheet shows the value (without the quote in most), and nothing runs. Numbers are written as numbers
(a negative number stays a number); only text is neutralised, whatever produced it (data, column names, JSON of a
nested value, base64 of binary, which may start with ``+``).
"""

from __future__ import annotations

# Formula starters, and every C0 control character (tab and carriage return among them).
_FORMULA_START = ("=", "+", "-", "@", *(chr(c) for c in range(0x20)))


def text_cell(text: str) -> str:
    """``text`` as a CSV cell no spreadsheet evaluates."""
    return "'" + text if text.startswith(_FORMULA_START) else text
