"""What every command group shares: how a command fails."""

from __future__ import annotations

import typer


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` in red on stderr; the caller raises the returned exit (code 1)."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(code=1)
