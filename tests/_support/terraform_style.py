"""What `tofu fmt` rewrites beyond layout, as findings: the test's formatter (hclfmt, hclwrite.Format) lays a file
out as tofu does but leaves these two legacy forms alone, so tests/integration/test_terraform_fmt.py looks for them.

- an interpolation-only string, ``"${var.x}"``, which tofu fmt unwraps to ``var.x``;
- a quoted type constraint, ``type = "string"``, which it unquotes (``"list"`` and ``"map"`` become
  ``list(string)`` and ``map(string)``).
"""

from __future__ import annotations

import re

_QUOTED_TYPE = re.compile(r'^\s*type\s*=\s*"(string|number|bool|list|map|set|any)"\s*(#.*)?$')


def legacy_forms(text: str) -> list[str]:
    """``line N: ...`` for each form tofu fmt would rewrite, in line order."""
    found: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if _QUOTED_TYPE.match(line):
            found.append(f"line {number}: a quoted type constraint (tofu fmt unquotes it)")
        if any(_interpolation_only(line, at) for at in _starts(line)):
            found.append(f'line {number}: an interpolation-only string "${{...}}" (tofu fmt unwraps it)')
    return found


def _starts(line: str) -> list[int]:
    return [m.start() for m in re.finditer(r'"\$\{', line)]


def _interpolation_only(line: str, at: int) -> bool:
    """Whether the string opening at ``at`` with ``"${`` closes right after its interpolation's ``}``."""
    depth, i, quoted = 0, at + 2, False
    while i < len(line):
        char = line[i]
        if quoted:
            quoted = char != '"' or line[i - 1] == "\\"
        elif char == '"':
            quoted = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return line[i + 1 : i + 2] == '"'
        i += 1
    return False
