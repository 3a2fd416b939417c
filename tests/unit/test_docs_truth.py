"""The docs agree with the code where a test can tell: links and anchors resolve, the extras they name exist, the HTTP
routes they name are served, the README links every page and names every destination and connector, and the counts
of packages are the real ones."""

from __future__ import annotations

import functools
import os
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

from fastapi.routing import iter_route_contexts

from connectors.ingest import router as ingest_router
from connectors.openlineage import router as openlineage_router
from connectors.runtime.webhooks import router as webhook_router
from tests._support.api_app import build_app

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").rglob("*.md"))]
NUMBERS = {"five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


def _prose(page: Path) -> Iterator[tuple[int, str]]:
    """The numbered lines of a page outside its code fences."""
    fenced = False
    for number, line in enumerate(page.read_text("utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield number, line


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped but ``-`` and ``_``, spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@functools.cache
def _anchors(page: Path) -> frozenset[str]:
    return frozenset(_slug(line.lstrip("#")) for _, line in _prose(page) if line.startswith("#"))


def test_every_relative_link_and_anchor_resolves() -> None:
    broken = []
    for page in PAGES:
        for number, line in _prose(page):
            for target in re.findall(r"\]\(([^)\s]+)\)", line):
                if re.match(r"^[a-z]+:", target):
                    continue  # https:, mailto:
                path, _, anchor = target.partition("#")
                dest = (page.parent / path).resolve() if path else page
                if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in _anchors(dest)):
                    broken.append(f"{page.relative_to(ROOT)}:{number}: {target}")
    assert not broken, f"links to nothing: {broken}"


def _text_files() -> Iterator[Path]:
    # Pruned as it walks: .stack/ holds the caches and virtualenvs, gigabytes.
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d not in {"__pycache__", "node_modules"}]
        for name in files:
            if name.endswith((".md", ".py", ".sh", ".toml", ".yaml", ".yml", ".txt")) or name.startswith("Container"):
                yield Path(folder, name)


def test_every_extra_named_is_defined() -> None:
    # An install of the package or the checkout with extras works only with extras pyproject.toml defines.
    extras = set(PROJECT["project"]["optional-dependencies"])
    named = re.compile(r"(?:metalake|[\"']\.)\[([a-z][a-z0-9_,\- ]*)\]")
    unknown = []
    for path in _text_files():
        for match in named.finditer(path.read_text("utf-8", errors="replace")):
            for extra in match.group(1).split(","):
                if extra.strip() not in extras:
                    unknown.append(f"{path.relative_to(ROOT)}: [{match.group(1)}]")
    assert not unknown, f"extras pyproject.toml does not define (it has {sorted(extras)}): {unknown}"


# The foreign APIs the docs quote (Jira, Freshdesk, Prometheus, Jaeger's query API), and fragments (a prefix, a path
# of a base URL).
FOREIGN = ("/rest/api/", "/api/v2/", "/-/", "/api/services", "/api/traces", "/{")


def _served() -> list[tuple[str, re.Pattern[str]]]:
    """(method, path pattern) of every route the admin API and the connector worker serve."""
    app, _ = build_app()
    contexts = [*iter_route_contexts(app.routes)]
    for router in (webhook_router, ingest_router, openlineage_router):
        contexts += iter_route_contexts(router.routes)
    served = [(m, c.path) for c in contexts for m in c.methods or ()]
    served += [("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics")]
    return [(m, re.compile("^" + re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(p)) + "$")) for m, p in served]


def test_every_route_a_doc_names_is_served() -> None:
    served = _served()
    missing = []
    for page in PAGES:
        for number, line in _prose(page):
            for method, path in re.findall(r"\b(GET|POST|PUT|PATCH|DELETE) (/[^\s`'\"),;]*)", line):
                path = re.sub(r"<[^>/]+>", "{x}", path.split("?")[0].rstrip(".:"))
                if path.startswith(FOREIGN) or path.endswith(("/", "*")):
                    continue
                if not any(m == method and pattern.match(path) for m, pattern in served):
                    missing.append(f"{page.relative_to(ROOT)}:{number}: {method} {path}")
    assert not missing, f"routes no app serves: {missing}"


def _readme() -> str:
    return (ROOT / "README.md").read_text("utf-8")


def test_the_readme_links_every_docs_page() -> None:
    linked = {(ROOT / target).resolve() for target in re.findall(r"\]\((docs/[^)#\s]+)", _readme())}
    unlinked = [str(p.relative_to(ROOT)) for p in PAGES if "docs" in p.parts and p.resolve() not in linked]
    assert not unlinked, f"README.md's Documentation does not link: {unlinked}"


def _squashed(text: str) -> str:
    return re.sub(r"[\s_-]", "", text.lower())


def test_the_readme_names_every_destination_and_connector() -> None:
    readme = _squashed(_readme())
    points = PROJECT["project"]["entry-points"]
    names = [*points["metalake.outbound"], *points["metalake.connectors"], "openlineage", "ingest"]
    assert [n for n in names if _squashed(n) not in readme] == []


def test_the_readme_says_how_trino_authenticates() -> None:
    trino = next(line for line in _readme().splitlines() if line.startswith("| trino "))
    assert "HTTPS only" in trino and "password" in trino and "JWT" in trino


def test_the_package_counts_are_the_real_ones() -> None:
    packages = PROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    assert sorted(PROJECT["tool"]["mypy"]["packages"]) == sorted(packages)
    for page in (ROOT / "CONTRIBUTING.md", ROOT / "docs" / "architecture.md"):
        counts = re.findall(r"\b(\w+) import packages", page.read_text("utf-8"), re.IGNORECASE)
        assert counts, page
        assert all(NUMBERS.get(c.lower()) == len(packages) for c in counts), (page.name, counts, len(packages))
    contributing = (ROOT / "CONTRIBUTING.md").read_text("utf-8")
    assert [p for p in packages if f"`{p}`" not in contributing] == []
