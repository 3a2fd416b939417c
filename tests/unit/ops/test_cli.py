"""The ``metalake`` command loads each group on demand, so one extra suffices for its own commands."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ops.cli import COMMANDS, app, load


def test_help_lists_every_group_without_importing_any_deployable() -> None:
    probe = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from ops.cli import app\n"
        "result = CliRunner().invoke(app, ['--help'])\n"
        "assert result.exit_code == 0, result.output\n"
        "print(result.output)\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in {'api', 'connectors', 'processors', 'deltalake',"
        " 'pyspark', 'fastapi'})\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert all(name in done.stdout for name in COMMANDS)


def test_connect_group_does_not_import_the_api_or_spark() -> None:
    # `metalake connect run` must work with only metalake[connectors] installed (no deltalake, no pyspark).
    probe = (
        "import sys\n"
        "from ops.cli import load\n"
        "load('connect')\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'api', 'processors', 'deltalake', 'pyspark'})\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_group_loads_and_explains_itself(name: str) -> None:
    command = load(name)
    assert command.name == name
    result = CliRunner().invoke(app, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage: metalake " + name in result.output


def test_an_unknown_command_is_refused_with_the_usage() -> None:
    result = CliRunner().invoke(app, ["nope"])
    assert result.exit_code == 2
    assert "No such command 'nope'" in result.output


def _entry_points(group: str) -> list[str]:
    project = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text("utf-8"))
    return list(project["project"]["entry-points"][group])


def _squashed(text: str) -> str:
    # "Monte Carlo" names the plugin montecarlo, "signed webhooks" the destination webhook.
    return re.sub(r"\s+", "", text.lower())


@pytest.mark.parametrize(
    ("group", "names"),
    [
        ("outbound", _entry_points("metalake.outbound")),
        ("connect", [*_entry_points("metalake.connectors"), "openlineage", "ingest"]),
    ],
)
def test_a_groups_help_names_every_plugin_it_runs(group: str, names: list[str]) -> None:
    result = CliRunner().invoke(app, [group, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    for text in (result.output, COMMANDS[group].summary):
        assert [n for n in names if n not in _squashed(text)] == [], text
