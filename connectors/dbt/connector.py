"""The dbt connector: a pull source over one project's artifacts (manifest.json, catalog.json).

Each poll reads the artifacts, maps them (:mod:`connectors.dbt.mapping`) and emits, per relation whose description
changed since the last poll: its upsert, its columns, deletes of columns it no longer has, its lineage edges (table
level from ``depends_on``, column level from the compiled SQL) and removals of the edges it lost. One partition per
dbt node (``{"node": unique_id}``); its offset records the fingerprint, columns and edges.

A node that left the project gets its lineage edges removed and its partition forgotten, but no asset delete: dbt
does not drop the relation, and whether it still exists is the warehouse crawler's to say.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from connectors.dbt.artifacts import parse, read
from connectors.dbt.config import DbtConfig
from connectors.dbt.mapping import Counts, DbtAsset, Project, build, inputs
from control.connectors.plugin import (
    FORGET,
    KEEP,
    ConnectorConfig,
    InvalidPartitionKey,
    SourceConnector,
    SourceRecord,
    parse_partition_key,
    partition_key,
)
from metalake.events import CloudEvent, new_event
from metalake.urn import AssetUrn, InvalidUrn

log = logging.getLogger(__name__)

UPSERTED = "io.metalake.asset.upserted.v1"
DELETED = "io.metalake.asset.deleted.v1"
EDGE_ADDED = "io.metalake.lineage.edge.added.v1"
EDGE_REMOVED = "io.metalake.lineage.edge.removed.v1"
_MAX_DESCRIPTION = 65536
_MAX_TEXT = 1024
# The ETags of each connector's last complete read of S3 artifacts, with the state (configuration and offsets) it
# left: a poll in that state asks the store with If-None-Match and, if nothing changed, downloads and parses nothing.
# In memory only (a restarted worker reads once in full); a few entries per connector this worker crawled.
_unchanged_reads: dict[tuple[str, str, int | None], tuple[str, dict[str, str]]] = {}
_MAX_REMEMBERED = 4096
_unchanged_lock = threading.Lock()


class DbtConnector(SourceConnector[DbtConfig]):
    """dbt artifacts -> assets, columns and lineage; incremental by node fingerprint."""

    config_model: ClassVar[type[ConnectorConfig]] = DbtConfig

    def poll(self, offsets: Mapping[str, Mapping[str, Any]]) -> Iterator[SourceRecord]:
        started = time.monotonic()
        config, tenant, access = self.config, self.ctx.tenant_id, self.ctx.access
        locations = {"manifest": config.manifest, **({"catalog": config.catalog} if config.catalog else {})}
        memo_key = (tenant, self.ctx.connector_name, self.ctx.task_id)
        with _unchanged_lock:
            known = _unchanged_reads.get(memo_key)
        etags = known[1] if known is not None and known[0] == _state(config, offsets) else {}
        raws = {kind: read(loc, tenant, access, kind, config, etags.get(kind)) for kind, loc in locations.items()}
        if etags and all(raw.body is None for raw in raws.values()):
            # Same objects (ETags) and the offsets their last read left: a read would emit nothing.
            log.info("dbt.artifacts_unchanged", extra={**etags, "elapsed_s": round(time.monotonic() - started, 3)})
            return
        for kind, raw in raws.items():
            if raw.body is None:  # unchanged, but another artifact changed: its bytes are needed after all
                raws[kind] = read(locations[kind], tenant, access, kind, config)
        memory = access.parse_memory_bytes
        manifest = parse(raws["manifest"].body or b"", "manifest", memory)
        catalog = parse(raws["catalog"].body or b"", "catalog", memory) if "catalog" in raws else {}
        project = Project(
            manifest, catalog, config.platform, config.instance, config.databases, config.dialect, config.max_sql_chars
        )
        after = dict(offsets)
        for record in self.records(project, offsets, started):
            key = partition_key(record.partition)
            if record.forgets:
                after.pop(key, None)
            elif isinstance(record.offset, Mapping):
                after[key] = record.offset
            yield record
        # Reached only when every record was taken; the runtime stores the offsets later, and a next poll whose
        # offsets differ from ``after`` (a publish failed) reads everything again.
        read_etags = {kind: raw.etag for kind, raw in raws.items()}
        state = _state(config, after) if all(read_etags.values()) else None
        with _unchanged_lock:
            _unchanged_reads.pop(memo_key, None)
            if state is not None:
                _unchanged_reads[memo_key] = (state, read_etags)
                while len(_unchanged_reads) > _MAX_REMEMBERED:
                    _unchanged_reads.pop(next(iter(_unchanged_reads)))

    def records(
        self, project: Project, offsets: Mapping[str, Mapping[str, Any]], started: float | None = None
    ) -> Iterator[SourceRecord]:
        """The records for ``project`` against the stored ``offsets`` (public for the bench: no file reads)."""
        started = time.monotonic() if started is None else started
        version = _version(offsets)
        counts, seen, changed = Counts(), set[str](), 0
        for node, digest in inputs(project):
            counts.nodes += 1
            partition = {"node": str(node.get("unique_id"))}
            key = partition_key(partition)
            seen.add(key)
            stored = offsets.get(key)
            if stored is not None and stored.get("hash") == digest:
                continue  # known from the inputs' digest: no SQL parsed, no event built
            changed += 1
            yield from self._asset(build(project, node, counts), partition, digest, version, stored)
        gone = [k for k in offsets if k not in seen]
        for key in sorted(gone):
            yield from self._gone(offsets[key], key, version)
        log.info(
            "dbt.project_read",
            extra={
                "nodes": counts.nodes, "changed": changed, "gone": len(gone), "sql_parsed": counts.parsed,
                "sql_unparsed": counts.unparsed, "elapsed_s": round(time.monotonic() - started, 3),
            },
        )  # fmt: skip

    def _event(self, event_type: str, data: dict[str, Any], version: int) -> CloudEvent:
        return new_event(event_type, self.ctx.tenant_id, {**data, "version": version}, source=self.ctx.source)

    def _asset(
        self, asset: DbtAsset, partition: dict[str, str], digest: str, version: int, stored: Mapping[str, Any] | None
    ) -> Iterator[SourceRecord]:
        out: list[CloudEvent] = []
        data: dict[str, Any] = {
            "urn": asset.urn,
            "kind": asset.kind,
            "name": asset.name,
            "properties": asset.properties,
        }
        # Absent means "leave as is": dbt without a description or owners leaves the crawler's comment and owners.
        if asset.description is not None:
            data["description"] = asset.description[:_MAX_DESCRIPTION]
        if asset.owners:
            data["owners"] = asset.owners
        out.append(self._event(UPSERTED, data, version))
        for column in asset.columns:
            cdata: dict[str, Any] = {
                "urn": _child(asset.urn, column.name),
                "kind": "column",
                "name": column.name,
            }
            if column.data_type is not None:
                cdata["data_type"] = column.data_type[:_MAX_TEXT]
            if column.description is not None:
                cdata["description"] = column.description[:_MAX_DESCRIPTION]
            if column.properties:
                cdata["properties"] = column.properties
            out.append(self._event(UPSERTED, cdata, version))
        names = [c.name for c in asset.columns]
        previous = (stored or {}).get("columns") or []
        out += [self._event(DELETED, {"urn": _child(asset.urn, n)}, version) for n in previous if n not in set(names)]
        transformation = f"dbt {asset.unique_id}"[:_MAX_TEXT]
        out += [
            self._event(EDGE_ADDED, {"urn": asset.urn, "upstream": up, "transformation": transformation}, version)
            for up in asset.upstreams
        ]
        column_upstreams: dict[str, list[str]] = {}
        for name, edges in asset.column_edges.items():
            target = _child(asset.urn, name)
            column_upstreams[name] = [up for up, _ in edges]
            out += [
                self._event(EDGE_ADDED, {"urn": target, "upstream": up, "transformation": expr[:_MAX_TEXT]}, version)
                for up, expr in edges
            ]
        out += [
            self._event(EDGE_REMOVED, {"urn": asset.urn, "upstream": up}, version)
            for up in (stored or {}).get("upstreams") or []
            if up not in set(asset.upstreams)
        ]
        for name, ups in _dict_of_lists((stored or {}).get("column_upstreams")).items():
            now = set(column_upstreams.get(name, ()))
            out += [
                self._event(EDGE_REMOVED, {"urn": _child(asset.urn, name), "upstream": up}, version)
                for up in ups
                if up not in now
            ]
        offset = {
            "urn": asset.urn, "hash": digest, "version": version, "columns": names, "upstreams": asset.upstreams,
            "column_upstreams": column_upstreams,
        }  # fmt: skip
        for i, event in enumerate(out, 1):
            yield SourceRecord(event, partition, offset if i == len(out) else KEEP)

    def _gone(self, stored: Mapping[str, Any], key: str, version: int) -> Iterator[SourceRecord]:
        urn = str(stored.get("urn") or "")
        try:
            AssetUrn.parse(urn)
        except InvalidUrn:
            log.warning("dbt.offset_ignored", extra={"partition": key})
            return
        try:
            partition = parse_partition_key(key)
        except InvalidPartitionKey:
            log.warning("dbt.offset_ignored", extra={"partition": key})
            return
        out = [self._event(EDGE_REMOVED, {"urn": urn, "upstream": up}, version) for up in stored.get("upstreams") or []]
        for name, ups in _dict_of_lists(stored.get("column_upstreams")).items():
            out += [self._event(EDGE_REMOVED, {"urn": _child(urn, name), "upstream": up}, version) for up in ups]
        if not out:
            # Nothing to undo (a seed or source has no upstream) and no record to carry FORGET: its small offset
            # stays, and each poll finds it gone again and emits nothing.
            return
        for i, event in enumerate(out, 1):
            yield SourceRecord(event, partition, FORGET if i == len(out) else KEEP)


def _state(config: DbtConfig, offsets: Mapping[str, Mapping[str, Any]]) -> str:
    """A digest of what a poll's output depends on besides the artifacts (secret fields show masked: no key in it)."""
    text = json.dumps([config.model_dump(mode="json"), offsets], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _child(urn: str, name: str) -> str:
    return str(AssetUrn.parse(urn).child(name))


def _dict_of_lists(value: Any) -> dict[str, list[str]]:  # noqa: ANN401
    if not isinstance(value, Mapping):
        return {}
    return {str(k): [str(u) for u in v] for k, v in value.items() if isinstance(v, list)}


def _version(offsets: Mapping[str, Mapping[str, Any]]) -> int:
    """Now in ms, but above every version a previous poll recorded, so a rerun's events supersede."""
    now = time.time_ns() // 1_000_000
    stored = [o.get("version") for o in offsets.values()]
    return max([now, *(v + 1 for v in stored if isinstance(v, int))])
