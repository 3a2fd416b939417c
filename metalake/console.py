"""How every command line of the project fails: one red ``error:`` line on stderr, then an exit code.

Exit codes: 1 failed, 2 refused (bad input: a typo, an unknown tenant, an unsafe option), as the lake commands
document. Callers ``raise fail(...)`` so control flow stays visible.
"""

from __future__ import annotations

import typer

FAILED = 1
REFUSED = 2


def fail(message: str, code: int = FAILED) -> typer.Exit:
    """Print ``error: message`` on stderr and return the exit to raise."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(code=code)
