"""Bodies several resources share."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel, Field

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a listing. ``next_cursor`` is null on the last page."""

    items: list[T]
    next_cursor: str | None = Field(default=None, description="Pass as `cursor` to get the next page.")
