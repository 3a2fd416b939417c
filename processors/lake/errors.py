"""The errors a lake command reports to its operator as one readable line (exit code 2), not as a traceback."""

from __future__ import annotations

from metalake.console import REFUSED
from metalake.settings import Settings


class LakeUsageError(Exception):
    """The request cannot be carried out as given: unknown tenant, invalid URN, unsafe retention."""


EXIT_USAGE = REFUSED


def require_local_lake(settings: Settings, command: str) -> None:
    """Refuse ``command`` before it touches anything when the lake is on S3: it lists or deletes the lake's files
    on a local file system (untracked files, folders), which has no S3 counterpart yet."""
    if settings.lake_on_s3:
        raise LakeUsageError(
            f"{command} does not run on a lake on S3 yet (lake.root is {settings.lake_root}); the streaming job, "
            "Trino and the audit tables do"
        )
