"""OpenLineage dataset names -> metalake asset URNs (the rule docs/connectors/openlineage.md documents).

An OpenLineage dataset is ``(namespace, name)`` as its naming spec gives them, e.g. ``postgres://db.example:5432`` +
``shop.public.orders``. The URN is ``urn:metalake:<platform>:<instance>/<database>/<schema>/<table>``:

* platform: the namespace's URI scheme, lower case (``postgres``), a few spellings folded into one (``postgresql`` ->
  ``postgres``, ``s3a``/``s3n`` -> ``s3``); a namespace that is not a URI (``bigquery``, ``file``) is the platform
  itself. Characters a platform may not hold become ``-``.
* instance: the namespace's authority (``db.example:5432``), lower case, without a ``user:password@`` part (a
  credential never reaches an event); ``default`` when there is none.
* database/schema/table: a name of three or more dot-separated parts is ``database.schema.table`` (a table name may
  hold dots: everything after the second dot); two parts (MySQL, Hive: ``database.table``) are ``default`` +
  ``schema.table``; one part is a table in ``default/default``. Storage and streaming platforms (files, object
  stores, Kafka) name paths and topics, whose dots are not separators: the whole name is the table in
  ``default/default``.

Every segment is percent-encoded by :mod:`metalake.urn`, so a name holding ``/`` round-trips.
"""

from __future__ import annotations

import re

from metalake.urn import AssetUrn, InvalidUrn

DEFAULT = "default"
_ALIASES = {"postgresql": "postgres", "s3a": "s3", "s3n": "s3"}
# Platforms whose dataset names are paths or topics (OpenLineage naming spec): dots there are part of the name.
_PATH_PLATFORMS = frozenset(
    {"file", "s3", "gs", "gcs", "hdfs", "abfs", "abfss", "wasb", "wasbs", "dbfs", "kafka", "pubsub", "kinesis"}
)
_NOT_PLATFORM = re.compile(r"[^a-z0-9_-]")


class InvalidName(ValueError):
    """A dataset that names no asset (empty name or namespace, or segments a URN cannot hold)."""


def _platform(scheme: str) -> str:
    value = _NOT_PLATFORM.sub("-", scheme.strip().lower())
    value = _ALIASES.get(value, value)
    if not value or not value[0].isalpha():
        value = "ol-" + value
    return value[:64]


def _instance(authority: str) -> str:
    userinfo, at, host = authority.rpartition("@")
    # ``user:password@host`` is a credential; ``container@account`` (Azure's abfss) is part of the address.
    if at and ":" in userinfo:
        authority = host
    return authority.strip().lower() or DEFAULT


def split_namespace(namespace: str) -> tuple[str, str]:
    """``(platform, instance)`` of an OpenLineage dataset namespace."""
    if not namespace.strip():
        raise InvalidName("the namespace is empty")
    scheme, sep, rest = namespace.partition("://")
    if not sep:
        return _platform(namespace), DEFAULT
    authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    return _platform(scheme), _instance(authority)


def table_path(platform: str, name: str) -> tuple[str, str, str]:
    """``(database, schema, table)`` of a dataset name on ``platform``."""
    if not name.strip():
        raise InvalidName("the name is empty")
    if platform in _PATH_PLATFORMS or "/" in name:
        return DEFAULT, DEFAULT, name
    parts = name.split(".")
    if len(parts) >= 3 and all(parts[:2]) and ".".join(parts[2:]):
        return parts[0], parts[1], ".".join(parts[2:])
    if len(parts) == 2 and all(parts):
        return DEFAULT, parts[0], parts[1]
    return DEFAULT, DEFAULT, name


def dataset_urn(namespace: str, name: str) -> AssetUrn:
    """The table URN of an OpenLineage dataset; raises :class:`InvalidName`."""
    platform, instance = split_namespace(namespace)
    try:
        return AssetUrn(platform, instance, table_path(platform, name))
    except InvalidUrn as exc:
        raise InvalidName(str(exc)) from None
