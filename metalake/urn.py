"""One URN scheme for every asset: ``urn:metalake:<platform>:<instance>/<database>[/<schema>[/<table>[/<column>]]]``.

Each path segment is percent-encoded, so names holding ``/``, ``:`` or spaces round-trip. The kind of asset follows
from the depth: database, schema, table, column.

A URN has one canonical spelling, ``str(AssetUrn.parse(value))`` (:func:`canonical_urn`): every segment percent-encoded
with nothing left safe, upper-case hex. ``.../jane doe's orders`` and ``.../jane%20doe%27s%20orders`` name the same
asset; only the second is canonical. Every entry point canonicalises (event construction and decoding in
``metalake.events``, the ingest API, the connectors' pipeline, the admin API's URN parameters), so stored URNs are
canonical and the erase, which compares exact values, finds them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote, unquote

AssetKind = Literal["database", "schema", "table", "column"]
_KINDS: tuple[AssetKind, ...] = ("database", "schema", "table", "column")
_PREFIX = "urn:metalake:"
_PLATFORM = re.compile(r"[a-z][a-z0-9_-]{0,63}")


class InvalidUrn(ValueError):
    """A string that is not a metalake asset URN."""


def _enc(segment: str) -> str:
    return quote(segment, safe="")


@dataclass(frozen=True)
class AssetUrn:
    platform: str
    instance: str
    path: tuple[str, ...]

    def __post_init__(self) -> None:
        if not _PLATFORM.fullmatch(self.platform):
            raise InvalidUrn(f"invalid platform {self.platform!r}: lowercase letters, digits, '_' or '-'")
        if not self.instance:
            raise InvalidUrn("the instance must not be empty")
        if not 1 <= len(self.path) <= len(_KINDS) or any(not p for p in self.path):
            raise InvalidUrn("the path needs 1 to 4 non-empty segments: database[/schema[/table[/column]]]")

    @property
    def kind(self) -> AssetKind:
        return _KINDS[len(self.path) - 1]

    @property
    def name(self) -> str:
        return self.path[-1]

    @property
    def qualified_name(self) -> str:
        """Dotted name without platform and instance, as a person reads it (``db.schema.table``)."""
        return ".".join(self.path)

    def parent(self) -> AssetUrn | None:
        if len(self.path) == 1:
            return None
        return AssetUrn(self.platform, self.instance, self.path[:-1])

    def child(self, name: str) -> AssetUrn:
        return AssetUrn(self.platform, self.instance, (*self.path, name))

    def __str__(self) -> str:
        segments = "/".join(_enc(p) for p in self.path)
        return f"{_PREFIX}{self.platform}:{_enc(self.instance)}/{segments}"

    @classmethod
    def parse(cls, value: str) -> AssetUrn:
        if not value.startswith(_PREFIX):
            raise InvalidUrn(f"not a metalake URN (expected prefix {_PREFIX!r}): {value!r}")
        rest = value[len(_PREFIX) :]
        platform, sep, locator = rest.partition(":")
        if not sep:
            raise InvalidUrn(f"missing ':' after the platform in {value!r}")
        instance, *path = locator.split("/")
        return cls(platform, unquote(instance), tuple(unquote(p) for p in path))


def canonical_urn(value: str) -> str:
    """The canonical spelling of an asset URN; raises :class:`InvalidUrn` for a string that is not one."""
    return str(AssetUrn.parse(value))


def asset_urn(platform: str, instance: str, *path: str) -> str:
    """Build a URN string, e.g. ``asset_urn("postgres", "prod", "shop", "public", "orders")``."""
    return str(AssetUrn(platform, instance, tuple(path)))
