"""What every request of the admin API shares: settings and the MongoDB client, kept on ``app.state``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from pymongo import MongoClient

from metalake.settings import Settings


@dataclass(frozen=True)
class ApiContext:
    settings: Settings
    mongo: MongoClient[dict[str, Any]]


def api_context(request: Request) -> ApiContext:
    ctx = request.app.state.ctx
    assert isinstance(ctx, ApiContext)  # noqa: S101 - set by create_app
    return ctx


ContextDep = Annotated[ApiContext, Depends(api_context)]
