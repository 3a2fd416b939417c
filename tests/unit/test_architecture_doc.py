"""docs/architecture.md's package table matches the code: every path it names exists, and every package of the
repository (each top-level package and each subpackage under it) is named by a row."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


def _table_keys() -> list[str]:
    """The first cells of the package table's rows: backticked paths, several per cell at times."""
    text = DOC.read_text("utf-8")
    start = text.index("| package | holds |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("| "):
            break
        rows.append(line.split(" | ")[0].removeprefix("| "))
    return rows


def _named_paths() -> set[str]:
    """Paths named in the first column: ``a/b.py``, ``a/b/``; a bare ``c.py`` after ``a/b.py`` is ``a/c.py``."""
    named: set[str] = set()
    for cell in _table_keys():
        folder = ""
        for token in re.findall(r"`([^`]+)`", cell):
            if "/" in token:
                folder = token if token.endswith("/") else token.rsplit("/", 1)[0] + "/"
                named.add(token.rstrip("/"))
            else:
                named.add(folder + token)
    return named


def _packages() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    tops = project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    found = []
    for top in tops:
        found.append(top)
        found += [
            str(init.parent.relative_to(ROOT))
            for init in sorted((ROOT / top).glob("*/__init__.py"))
            if init.parent.name != "__pycache__"
        ]
    return found


def test_every_named_path_exists() -> None:
    missing = sorted(p for p in _named_paths() if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_package_is_named() -> None:
    named = _named_paths()

    def covered(package: str) -> bool:
        # A package is named by its own row, or by a row of one of its modules or subfolders.
        return any(p == package or p.startswith(package + "/") for p in named)

    unnamed = [p for p in _packages() if not covered(p)]
    assert not unnamed, f"docs/architecture.md's package table does not name: {unnamed}"


NUMBERS = {"two": 2, "three": 3, "four": 4}


def test_the_decisions_count_the_jobs_queries() -> None:
    # "Three streaming queries per job": what the job plans with default settings (docs/streaming.md says it too).
    from ops.settings import Settings
    from processors.enrichment.main import JobOptions, _plan

    planned = len(_plan(Settings(), JobOptions()))
    for page, pattern in (
        (DOC, r"\*\*(\w+) streaming queries per job\*\*"),
        (DOC.parent / "streaming.md", r"runs (\w+) Spark"),
    ):
        words = re.findall(pattern, page.read_text("utf-8"))
        assert words and all(NUMBERS.get(w.lower()) == planned for w in words), (page.name, words, planned)
