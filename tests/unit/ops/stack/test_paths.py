"""The operator tooling finds its checkout and points settings (its own and its children's) at the checkout's stack."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metalake.settings import load_settings
from ops.settings import Settings
from ops.stack.paths import find_project_root, use_checkout_stack, with_stack_paths
from ops.stack.settings import StackSettings


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "deploy" / "local").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    return root


def test_find_project_root(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    nested = root / "a" / "b"
    nested.mkdir(parents=True)
    assert find_project_root(nested) == root.resolve()
    assert find_project_root(root) == root.resolve()


def test_find_project_root_falls_back_to_start(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")  # no deploy/local: not a metalake checkout
    assert find_project_root(tmp_path) == tmp_path.resolve()


@pytest.fixture
def bare_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No METALAKE_ variable (the test session's own point at this checkout's stack)."""
    for name in list(os.environ):
        if name.startswith("METALAKE_"):
            monkeypatch.delenv(name)


@pytest.mark.usefixtures("bare_environment")
def test_the_checkout_stack_reaches_settings_through_the_environment(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    (root / ".stack").mkdir()
    (root / ".stack" / "stack.env").write_text("METALAKE_STACK__PORTS__KAFKA=19092\n")
    assert use_checkout_stack(root) == root.resolve()
    assert os.environ["METALAKE_STACK__DIR"] == str(root.resolve() / ".stack")
    settings = load_settings(Settings)
    assert settings.kafka_bootstrap == "127.0.0.1:19092"
    stack = root.resolve() / ".stack"
    assert settings.lake_root == stack / "data" / "lake"
    assert settings.checkpoint_root == stack / "data" / "checkpoints"
    assert settings.spark.jars_dir == stack / "cache" / "spark" / "jars"
    assert settings.spark.scratch_dir == stack / "data" / "spark"
    assert settings.access_rules_file == stack / "run" / "trino" / "etc" / "rules.json"


@pytest.mark.usefixtures("bare_environment")
def test_a_path_the_env_file_sets_wins_over_the_stack_folder(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    (root / ".stack").mkdir()
    (root / ".stack" / "stack.env").write_text(f"METALAKE_LAKE__ROOT={tmp_path / 'lake-elsewhere'}\n")
    use_checkout_stack(root)
    settings = load_settings(Settings)
    assert settings.lake_root == tmp_path / "lake-elsewhere"
    assert settings.checkpoint_root == root.resolve() / ".stack" / "data" / "checkpoints"


@pytest.mark.usefixtures("bare_environment")
def test_settings_built_without_the_env_file_name_the_paths_it_sets(tmp_path: Path) -> None:
    # A unit test's Settings(...) reads the environment only: with a live stack's stack.env (which names the lake
    # root) it had no lake root at all, and 15 unit tests failed in a checkout whose stack was up.
    root = _checkout(tmp_path)
    (root / ".stack").mkdir()
    (root / ".stack" / "stack.env").write_text(f"METALAKE_LAKE__ROOT={tmp_path / 'lake-elsewhere'}\n")
    use_checkout_stack(root)
    assert Settings().lake_root == tmp_path / "lake-elsewhere"


def test_with_stack_paths_follows_the_settings_stack_folder(tmp_path: Path) -> None:
    settings = with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / "s")))
    assert settings.access_rules_file == tmp_path / "s" / "run" / "trino" / "etc" / "rules.json"
    assert settings.lake_root == tmp_path / "s" / "data" / "lake"


def test_variables_already_set_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METALAKE_STACK__DIR", str(tmp_path / "elsewhere"))
    monkeypatch.delenv("METALAKE_ENV_FILE", raising=False)
    use_checkout_stack(_checkout(tmp_path))
    assert os.environ["METALAKE_ENV_FILE"] == str(tmp_path / "elsewhere" / "stack.env")
