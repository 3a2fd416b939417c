"""Fault points shared by the processors (``METALAKE_FAULTS__*``), for the tests that kill them mid-flight."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel


class FaultSettings(BaseModel):
    """Fault points for the tests that kill processes mid-flight (``METALAKE_FAULTS__*``); all off by default.

    ``kill_after_delta``/``kill_after_mongo`` name a batch id at which the streaming job SIGKILLs itself after that
    lake batch's Delta commits (before its offsets) or that projection batch's MongoDB writes (before its changes are
    published); ``lake_only`` keeps the projection queries from starting, so MongoDB stays behind the lake.
    ``pause_after_publish`` names a file the propagation processor writes after its first batch that published, then
    waits, before committing, to be killed.
    """

    kill_after_delta: int | None = None
    kill_after_mongo: int | None = None
    lake_only: bool = False
    pause_after_publish: Path | None = None
