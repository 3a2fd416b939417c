"""Where the local stack of a checkout lives, and how the operator tooling points processes at it.

Only the operator tooling discovers a checkout: every deployable reads its settings from the environment (and from
the file ``METALAKE_ENV_FILE`` names), nothing else. ``metalake`` (and the tests and benchmarks of a checkout) call
``use_checkout_stack`` once at start, so they and every process they start use the checkout's ``.stack/``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from metalake.settings import required

if TYPE_CHECKING:
    from ops.settings import Settings


def find_project_root(start: Path | None = None) -> Path:
    """The checkout that holds deploy/local, found upwards from ``start`` (default: the working directory)."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "deploy" / "local").is_dir() and (candidate / "pyproject.toml").is_file():
            return candidate
    return here


# The settings (section, dotted when nested; field) that name a folder or file of the local stack, relative to its
# folder. The deployables' settings have no default for them (a deployment sets them); the tooling sets these.
_STACK_PATHS: dict[tuple[str, str], str] = {
    ("lake", "root"): "data/lake",
    ("lake", "checkpoint_root"): "data/checkpoints",
    ("spark", "jars_dir"): "cache/spark/jars",
    ("lake.s3", "spark_jars_dir"): "cache/spark-s3/jars",
    ("spark", "scratch_dir"): "data/spark",
    ("access", "rules_file"): "run/trino/etc/rules.json",
}


def stack_paths(stack_dir: Path) -> dict[str, str]:
    """The local stack's paths by environment variable (``METALAKE_LAKE__ROOT``...)."""
    return {
        f"METALAKE_{section.upper().replace('.', '__')}__{name.upper()}": str(stack_dir / relative)
        for (section, name), relative in _STACK_PATHS.items()
    }


def with_stack_paths(settings: Settings) -> Settings:
    """A copy of ``settings`` with the paths of the local stack in ``stack.dir`` (tests of the tooling, which must
    not follow the checkout's paths the test session's environment holds)."""
    out = settings.model_copy(deep=True)
    for (section, name), relative in _STACK_PATHS.items():
        holder: object = out
        for part in section.split("."):
            holder = getattr(holder, part)
        setattr(holder, name, settings.local_stack_dir / relative)
    return out


def use_checkout_stack(start: Path | None = None) -> Path:
    """Point this process (and its children, through the environment) at the checkout's ``.stack/``: its folder,
    the ``stack.env`` the stack writes (addresses, generated secrets) and its paths (``stack_paths``). Variables
    already set win, and so does a path the env file sets (e.g. a lake root elsewhere): exported too, so settings
    built without the env file (``Settings(...)`` in a unit test) name the same paths. Returns the checkout's root."""
    root = find_project_root(start)
    stack_dir = Path(os.environ.get("METALAKE_STACK__DIR") or root / ".stack")
    os.environ.setdefault("METALAKE_STACK__DIR", str(stack_dir))
    os.environ.setdefault("METALAKE_ENV_FILE", str(stack_dir / "stack.env"))
    in_file = _variables_of(Path(os.environ["METALAKE_ENV_FILE"]))
    for variable, value in stack_paths(stack_dir).items():
        os.environ.setdefault(variable, in_file.get(variable, value))
    return root


def exported_stack_dir() -> Path:
    """The stack's folder the tooling exported to this process (``use_checkout_stack``): for tooling code that runs
    inside a deployable, whose settings have no stack section (the local launcher in the admin API)."""
    return Path(required(os.environ.get("METALAKE_STACK__DIR"), "stack.dir"))


def _variables_of(env_file: Path) -> dict[str, str]:
    try:
        lines = env_file.read_text().splitlines()
    except OSError:
        return {}
    pairs = (line.partition("=") for line in lines if "=" in line and not line.lstrip().startswith("#"))
    return {name.strip(): value.strip().strip("\"'") for name, _, value in pairs}
