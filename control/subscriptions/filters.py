"""Which changes a subscription wants: event kinds, tags, asset URN patterns and the tags the asset carries (all
optional, all must match)."""

from __future__ import annotations

from collections.abc import Collection
from fnmatch import fnmatchcase

from pydantic import BaseModel, ConfigDict, Field

from catalog.changes import Change

_Pattern = Field(min_length=1, max_length=512)


class Filters(BaseModel):
    """Empty lists match everything. ``event_types`` are globs on the change kind (``classification.*``) or the
    CloudEvent type; ``tags`` compare case-insensitively; ``assets`` are globs on the asset URN
    (``urn:metalake:postgres:prod/shop/*``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    event_types: tuple[str, ...] = Field(default=(), max_length=50)
    tags: tuple[str, ...] = Field(default=(), max_length=50)
    assets: tuple[str, ...] = Field(default=(), max_length=50)
    # Tags the change's asset must carry (one of them, directly or propagated, case-insensitive) when the change is
    # delivered: the outbound runtime reads them from the tenant's catalog (e.g. incidents on PII-tagged tables only).
    asset_tags: tuple[str, ...] = Field(default=(), max_length=50)

    def matches(self, change: Change) -> bool:
        if self.event_types and not any(
            fnmatchcase(change.kind, p) or fnmatchcase(change.type, p) for p in self.event_types
        ):
            return False
        if self.tags:
            tag = change.tag
            if tag is None or tag.casefold() not in {t.casefold() for t in self.tags}:
                return False
        if self.assets:
            asset = change.asset
            if asset is None or not any(fnmatchcase(asset, p) for p in self.assets):
                return False
        return True

    def wants_asset_tags(self, carried: Collection[str]) -> bool:
        """Whether an asset carrying ``carried`` passes ``asset_tags`` (empty: every asset does)."""
        if not self.asset_tags:
            return True
        held = {t.casefold() for t in carried}
        return any(t.casefold() in held for t in self.asset_tags)
