"""dbt artifacts are parsed in a child process under a memory limit, cut down to what the mapping reads, with depth and
element bounds: a crafted manifest neither grows the worker every tenant's crawls share nor escapes as RecursionError.
(Parsed in the worker, ``json.loads`` took ~25x a 256 MiB artifact and held the GIL for seconds.)"""

from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from connectors.dbt import DbtConfig, DbtConnector
from connectors.dbt.artifacts import MAX_DEPTH, ArtifactError, parse
from connectors.dbt.parse_child import RELATION_TYPES
from control.connectors.plugin import ConnectorContext, SourceAccess
from control.connectors.settings import ConnectSettings

ARTIFACTS = Path(__file__).resolve().parents[2] / "fixtures" / "dbt_project" / "artifacts"
MANIFEST = json.loads((ARTIFACTS / "manifest.json").read_text())
MODEL = "model.jaffle.orders"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "acme" / "jaffle"
    folder.mkdir(parents=True)
    for name in ("manifest.json", "catalog.json"):
        shutil.copy(ARTIFACTS / name, folder / name)
    return tmp_path


def _write_manifest(root: Path, meta_value: bytes) -> int:
    """The fixture's manifest with ``meta_value`` (raw JSON) as a model's ``meta.x``; its size in bytes."""
    manifest = json.loads(json.dumps(MANIFEST))
    manifest["nodes"][MODEL]["meta"] = {"x": "@@"}
    body = json.dumps(manifest).encode().replace(b'"@@"', meta_value)
    (root / "acme" / "jaffle" / "manifest.json").write_bytes(body)
    return len(body)


def _poll(root: Path, **access: Any) -> list[Any]:
    config = DbtConfig(manifest="jaffle/manifest.json", catalog="jaffle/catalog.json", instance="wh")
    ctx = ConnectorContext("acme", "dbt", access=SourceAccess(artifact_roots=(str(root),), **access))
    return list(DbtConnector(config, ctx).poll({}))


def test_a_manifest_nested_deeper_than_the_parser_is_an_error_naming_it(root: Path) -> None:
    _write_manifest(root, b"[" * 100_000 + b"]" * 100_000)  # RecursionError escaped the crawl
    with pytest.raises(ArtifactError) as err:
        _poll(root)
    assert err.value.error_class == "invalid-artifact"
    assert str(err.value).startswith("invalid-artifact: manifest nests deeper")


def test_nesting_the_parser_takes_but_the_mapping_would_recurse_on_is_refused(root: Path) -> None:
    _write_manifest(root, b"[" * 500 + b"]" * 500)
    with pytest.raises(ArtifactError, match=f"manifest nests deeper than {MAX_DEPTH} levels"):
        _poll(root)


def test_a_flood_of_tiny_values_is_refused_without_growing_the_worker(root: Path) -> None:
    # 1.2 million empty objects: ~3.6 MB of artifact, ~90 MB once parsed in the worker.
    size = _write_manifest(root, b"[" + b",".join([b"{}"] * 1_200_000) + b"]")
    tracemalloc.start()
    try:
        with pytest.raises(ArtifactError, match="manifest holds more than"):
            _poll(root)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * size, f"the worker's peak was {peak} bytes for a {size}-byte artifact"


def test_a_parse_over_the_memory_limit_is_too_large_naming_the_setting(root: Path) -> None:
    _write_manifest(root, b"[" + b",".join([b"{}"] * 1_500_000) + b"]")
    with pytest.raises(ArtifactError) as err:
        _poll(root, parse_memory_bytes=96 * 1024 * 1024)
    assert err.value.error_class == "too-large"
    assert "manifest needs more than" in str(err.value) and "connect.artifact_parse_memory_bytes" in str(err.value)


def test_only_what_the_mapping_reads_comes_back_and_the_crawl_is_unchanged(root: Path) -> None:
    raw = (ARTIFACTS / "manifest.json").read_bytes()
    kept = parse(raw, "manifest")
    assert set(kept) == {"metadata", "nodes", "sources", "groups"}  # macros, docs, maps, exposures... dropped
    assert {n["resource_type"] for n in kept["nodes"].values()} <= RELATION_TYPES
    assert {k for k, n in MANIFEST["nodes"].items() if n["resource_type"] in RELATION_TYPES} == set(kept["nodes"])
    assert kept["nodes"][MODEL] == MANIFEST["nodes"][MODEL]  # whole nodes: their digests are unchanged
    assert len(_poll(root)) > 0


def test_the_default_cap_is_far_lower_and_the_runtime_passes_both_bounds() -> None:
    connect = ConnectSettings()
    assert connect.artifact_max_bytes == 64 * 1024 * 1024
    access = SourceAccess.from_settings(connect)
    assert (access.max_artifact_bytes, access.parse_memory_bytes) == (64 * 1024 * 1024, 1024 * 1024 * 1024)
    assert SourceAccess().max_artifact_bytes == connect.artifact_max_bytes
