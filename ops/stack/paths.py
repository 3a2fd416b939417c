"""Where the local stack of a checkout lives, and how the operator tooling points processes at it.

Only the operator tooling discovers a checkout: every deployable reads its settings from the environment (and from
the file ``METALAKE_ENV_FILE`` names), nothing else. ``metalake`` (and the tests and benchmarks of a checkout) call
``use_checkout_stack`` once at start, so they and every process they start use the checkout's ``.stack/``.
"""

from __future__ import annotations

import os
from pathlib import Path


def find_project_root(start: Path | None = None) -> Path:
    """The checkout that holds deploy/local, found upwards from ``start`` (default: the working directory)."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "deploy" / "local").is_dir() and (candidate / "pyproject.toml").is_file():
            return candidate
    return here


def use_checkout_stack(start: Path | None = None) -> Path:
    """Point this process (and its children, through the environment) at the checkout's ``.stack/``: its folder and
    the ``stack.env`` the stack writes (addresses, generated secrets). Variables already set win. Returns the
    checkout's root."""
    root = find_project_root(start)
    stack_dir = Path(os.environ.get("METALAKE_STACK__DIR") or root / ".stack")
    os.environ.setdefault("METALAKE_STACK__DIR", str(stack_dir))
    os.environ.setdefault("METALAKE_ENV_FILE", str(stack_dir / "stack.env"))
    return root
