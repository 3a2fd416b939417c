"""Where the lake lives: a local folder (:class:`pathlib.Path`) or an S3 prefix (:class:`S3Path`), as one type.

``settings.lake.root`` takes either ``/some/folder`` or ``s3a://bucket/prefix`` (``s3://`` is read as the same
place). Code that only builds names (``tenants.naming``) joins with ``/`` whatever the root is; each engine then
gets the spelling it expects: Spark ``s3a://`` (:func:`spark_uri`), delta-rs ``s3://`` (:func:`delta_rs_uri`), Trino
``s3://`` (``tenants.lake_catalog``). Code that needs a file system (listing, ``rmtree``) asks :func:`local_path`,
which names the setting and the command when the lake is on S3, instead of failing later in an odd place.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

S3_SCHEMES = ("s3a://", "s3://")
# S3's bucket naming rules (3 to 63 lowercase letters, digits, dots and hyphens; a letter or digit at each end).
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


class NotOnLocalDisk(RuntimeError):
    """A command that needs the lake on a local file system was given a lake on S3."""


class S3Path(PurePosixPath):
    """An object-store location ``s3a://<bucket>/<key prefix>``: a pure path (``/``, ``name``, ``parent``,
    ``relative_to``) held as ``/<bucket>/<key>``. It is never a file-system path: ``os.fspath`` refuses it, so
    ``open()`` or ``shutil`` cannot silently act on a local folder named like the bucket."""

    @classmethod
    def parse(cls, uri: str) -> S3Path:
        scheme = next((s for s in S3_SCHEMES if uri.startswith(s)), None)
        if scheme is None:
            raise ValueError(f"not an s3a:// or s3:// URI: {uri!r}")
        rest = uri[len(scheme) :].rstrip("/")
        bucket = rest.split("/", 1)[0]
        if not _BUCKET.fullmatch(bucket) or any(p in (".", "..") for p in rest.split("/")):
            raise ValueError("an S3 lake root needs a bucket name and a prefix without '.' or '..' parts")
        return cls("/" + rest)

    @property
    def bucket(self) -> str:
        return self.parts[1]

    @property
    def key(self) -> str:
        """The object key prefix inside the bucket (no leading '/'; empty at the bucket's root)."""
        return "/".join(self.parts[2:])

    def uri(self, scheme: str = "s3a") -> str:
        if not self.is_absolute():
            raise ValueError("a relative S3 path has no URI")
        return f"{scheme}://{self.bucket}" + (f"/{self.key}" if self.key else "")

    @property
    def folder(self) -> str:
        """The key prefix of the objects under this location, as a "folder" (``lake/acme/``; empty at the bucket's
        root): with the slash, ``lake/acme/`` never matches ``lake/acme2/...``."""
        return f"{self.key}/" if self.key else ""

    def __str__(self) -> str:
        return self.uri() if self.is_absolute() else super().__str__()

    def __repr__(self) -> str:
        return f"S3Path({str(self)!r})"

    def __fspath__(self) -> str:
        raise TypeError(f"{self} is an S3 location, not a local file-system path")

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:  # noqa: ANN401
        return core_schema.no_info_plain_validator_function(
            lambda v: v if isinstance(v, cls) else cls.parse(str(v)),
            serialization=core_schema.to_string_ser_schema(),
        )


LakeRoot = Path | S3Path


def parse_lake_root(value: object) -> LakeRoot | None:
    """The settings' spelling: ``s3a://``/``s3://`` URIs become :class:`S3Path`, anything else a resolved
    :class:`Path`."""
    if value is None or isinstance(value, S3Path):
        return value
    if isinstance(value, str) and value.startswith(S3_SCHEMES):
        return S3Path.parse(value)
    if isinstance(value, (str, Path)):
        return Path(value).resolve()
    raise TypeError("lake root: a folder path or an s3a:// URI")


def lake_root_of(text: str) -> LakeRoot:
    """A lake root as stored (the tenant registry's ``lake_root``): an S3 URI or an absolute folder, as is."""
    return S3Path.parse(text) if text.startswith(S3_SCHEMES) else Path(text)


def is_s3(path: LakeRoot) -> bool:
    return isinstance(path, S3Path)


def spark_uri(path: LakeRoot) -> str:
    """What Spark (Hadoop's file systems) reads: ``s3a://...`` or the local folder."""
    return path.uri("s3a") if isinstance(path, S3Path) else str(path)


def delta_rs_uri(path: LakeRoot) -> str:
    """What delta-rs (``deltalake``) reads: ``s3://...`` (its object_store scheme) or the local folder."""
    return path.uri("s3") if isinstance(path, S3Path) else str(path)


def delta_rs_table_uri(path: LakeRoot) -> str:
    """:func:`delta_rs_uri` of a table delta-rs may create: a local table's folder is made first (delta-rs creates
    the folders of a table's files, not the table's own)."""
    if isinstance(path, Path):
        path.mkdir(parents=True, exist_ok=True)
    return delta_rs_uri(path)


def local_path(path: LakeRoot, what: str) -> Path:
    """``path`` if the lake is on a local file system; else a clear refusal naming ``what`` needs one."""
    if isinstance(path, S3Path):
        raise NotOnLocalDisk(f"{what} needs the lake on a local file system; lake.root is {path.uri()}")
    return path
