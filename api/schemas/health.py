"""Liveness and readiness answers."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready", "not-ready"]
    checks: dict[str, Literal["ok", "unreachable"]]
