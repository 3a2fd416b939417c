"""dbt's manifest and catalog to assets, columns and lineage. Pure: no I/O.

The URN of a node is the relation dbt builds or reads: ``asset_urn(platform, instance, database, schema, name)``
with ``name`` the model's ``alias`` (seeds, snapshots likewise) or the source's ``identifier``, spelled as the
artifacts spell them. That is the URN the PostgreSQL crawler gives the same table when both use the same
``platform`` and ``instance``: dbt's descriptions, owners and lineage land on the crawler's assets.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from connectors.sqllineage import TableName, UnparseableSql, lineage
from metalake.urn import asset_urn

log = logging.getLogger(__name__)

RELATION_TYPES = ("model", "seed", "snapshot", "source")
# Part of every node's digest: raise it when the mapping changes what it emits, so the next import re-emits all.
MAPPING_VERSION = 1
_MAX_PROPERTY = 8192
_MAX_PROPERTIES = 200
_MAX_OWNER = 320
_MAX_OWNERS = 100


@dataclass(frozen=True)
class DbtColumn:
    name: str
    data_type: str | None
    description: str | None
    properties: dict[str, str]


@dataclass(frozen=True)
class DbtAsset:
    """One relation dbt builds or reads, with its columns and where its data comes from."""

    unique_id: str
    urn: str
    kind: str
    name: str
    description: str | None
    owners: list[str]
    properties: dict[str, str]
    columns: list[DbtColumn]
    upstreams: list[str]
    # column name -> [(upstream column URN, expression)], from the compiled SQL
    column_edges: dict[str, list[tuple[str, str]]] = field(default_factory=dict)


@dataclass
class Counts:
    nodes: int = 0
    parsed: int = 0
    unparsed: int = 0


@dataclass(frozen=True)
class Project:
    """The artifacts, indexed: relations by unique id, their columns (catalog first) and how to name them."""

    manifest: Mapping[str, Any]
    catalog: Mapping[str, Any]
    platform: str
    instance: str
    databases: Mapping[str, str]
    dialect: str = "postgres"
    max_sql_chars: int = 200_000

    def nodes(self) -> Iterator[Mapping[str, Any]]:
        """Models, seeds, snapshots and sources, by unique id; ephemeral models (no relation) left out."""
        everything = {**_dict(self.manifest.get("nodes")), **_dict(self.manifest.get("sources"))}
        for unique_id in sorted(everything):
            node = _dict(everything[unique_id])
            if node.get("resource_type") in RELATION_TYPES and not _ephemeral(node):
                yield node

    def relation(self, node: Mapping[str, Any]) -> TableName:
        name = node.get("identifier") if node.get("resource_type") == "source" else node.get("alias")
        return (str(node.get("database") or ""), str(node.get("schema") or ""), str(name or node.get("name") or ""))

    def urn(self, relation: TableName, *column: str) -> str:
        database, schema, name = relation
        return asset_urn(self.platform, self.instance, self.databases.get(database, database), schema, name, *column)

    def node(self, unique_id: str) -> Mapping[str, Any]:
        return _dict(
            _dict(self.manifest.get("nodes")).get(unique_id) or _dict(self.manifest.get("sources")).get(unique_id)
        )

    def catalog_node(self, unique_id: str) -> Mapping[str, Any]:
        return _dict(
            _dict(self.catalog.get("nodes")).get(unique_id) or _dict(self.catalog.get("sources")).get(unique_id)
        )

    def column_names(self, node: Mapping[str, Any]) -> list[str]:
        listed = _dict(self.catalog_node(str(node.get("unique_id"))).get("columns"))
        if listed:
            return [str(c.get("name")) for c in sorted(map(_dict, listed.values()), key=lambda c: c.get("index") or 0)]
        return [str(_dict(c).get("name")) for c in _dict(node.get("columns")).values()]

    def upstream_ids(self, node: Mapping[str, Any]) -> list[str]:
        """The relations ``node`` reads (``depends_on.nodes``), through ephemeral models to what they read."""
        out: list[str] = []
        seen: set[str] = set()
        stack = list(reversed(_depends_on(node)))
        while stack:
            unique_id = stack.pop()
            if unique_id in seen:
                continue
            seen.add(unique_id)
            parent = self.node(unique_id)
            if parent.get("resource_type") not in RELATION_TYPES:
                continue
            if _ephemeral(parent):
                stack.extend(reversed(_depends_on(parent)))
            else:
                out.append(unique_id)
        return out


def assets(project: Project, counts: Counts | None = None) -> Iterator[DbtAsset]:
    """Every relation of the project as an asset, in unique id order."""
    counts = counts if counts is not None else Counts()
    for node, _ in inputs(project):
        counts.nodes += 1
        yield build(project, node, counts)


def inputs(project: Project) -> Iterator[tuple[Mapping[str, Any], str]]:
    """Each relation's node with a digest of everything its asset is built from: the node (without dbt's parse
    timestamp), its catalog entry (without statistics), its group, what its upstreams are called and hold, and how
    URNs are made. An unchanged digest means an unchanged asset, known without parsing any SQL."""
    groups = _dict(project.manifest.get("groups"))
    naming = [MAPPING_VERSION, project.platform, project.instance, sorted(project.databases.items()), project.dialect]
    for node in project.nodes():
        unique_id = str(node.get("unique_id"))
        catalog = {k: v for k, v in project.catalog_node(unique_id).items() if k != "stats"}
        upstreams = [
            (project.relation(n), project.column_names(n)) for n in map(project.node, project.upstream_ids(node))
        ]
        group = [g for g in groups.values() if _dict(g).get("name") == node.get("group")]
        parts = [naming, {k: v for k, v in node.items() if k != "created_at"}, catalog, group, upstreams]
        text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
        yield node, hashlib.sha256(text.encode()).hexdigest()


def build(project: Project, node: Mapping[str, Any], counts: Counts) -> DbtAsset:
    """One node's asset: columns, owners, properties, table and column lineage (parses its compiled SQL)."""
    groups = {str(_dict(g).get("name")): _dict(g) for g in _dict(project.manifest.get("groups")).values()}
    unique_id = str(node.get("unique_id"))
    relation = project.relation(node)
    upstream_nodes = [project.node(u) for u in project.upstream_ids(node)]
    upstreams = {project.relation(n): project.urn(project.relation(n)) for n in upstream_nodes}
    edges: dict[str, list[tuple[str, str]]] = {}
    sql = node.get("compiled_code")
    if isinstance(sql, str) and sql.strip() and upstreams:
        # Only the relations the node depends on: compiled SQL names them in full, and a schema of the whole
        # project per node would make an import quadratic in the number of models.
        known = {project.relation(n): project.column_names(n) for n in upstream_nodes}
        edges = _column_edges(project, node, relation, sql, upstreams, known, counts)
    return DbtAsset(
        unique_id=unique_id,
        urn=project.urn(relation),
        kind=_kind(node, project.catalog_node(unique_id)),
        name=relation[2],
        description=_text(node.get("description")),
        owners=_owners(node, groups),
        properties=_properties(node),
        columns=_columns(project, node),
        upstreams=sorted(set(upstreams.values())),
        column_edges=edges,
    )


def _column_edges(  # noqa: PLR0913
    project: Project,
    node: Mapping[str, Any],
    relation: TableName,
    sql: str,
    upstreams: Mapping[TableName, str],
    known: Mapping[TableName, list[str]],
    counts: Counts,
) -> dict[str, list[tuple[str, str]]]:
    fields = {"node": node.get("unique_id")}
    if len(sql) > project.max_sql_chars:
        counts.unparsed += 1
        log.warning("dbt.sql_unparsed", extra={**fields, "reason": "compiled SQL too long"})
        return {}
    try:
        result = lineage(sql, dialect=project.dialect, database=relation[0], search_path=[relation[1]], tables=known)
    except UnparseableSql as exc:
        counts.unparsed += 1
        log.warning("dbt.sql_unparsed", extra={**fields, "reason": exc.reason})
        return {}
    counts.parsed += 1
    # Output columns by name, as the built relation has them (catalog), case-insensitively for unquoted names.
    outputs = {c.name.lower(): c for c in result.columns}
    edges: dict[str, list[tuple[str, str]]] = {}
    for name in project.column_names(node) or [c.name for c in result.columns]:
        output = outputs.get(name.lower())
        if output is None:
            continue
        ups = sorted({project.urn(s.table, s.column) for s in output.sources if s.table in upstreams})
        if ups:
            edges[name] = [(u, output.expression) for u in ups]
    return edges


def _kind(node: Mapping[str, Any], catalog_node: Mapping[str, Any]) -> str:
    table_type = str(_dict(catalog_node.get("metadata")).get("type") or "").upper()
    if table_type:
        return "view" if "VIEW" in table_type else "table"
    return "view" if _dict(node.get("config")).get("materialized") == "view" else "table"


def _columns(project: Project, node: Mapping[str, Any]) -> list[DbtColumn]:
    documented = {str(k).lower(): _dict(v) for k, v in _dict(node.get("columns")).items()}
    typed = {
        str(_dict(c).get("name")): _dict(c)
        for c in _dict(project.catalog_node(str(node.get("unique_id"))).get("columns")).values()
    }
    out = []
    for name in project.column_names(node):
        doc = documented.get(name.lower(), {})
        data_type = typed.get(name, {}).get("type") or doc.get("data_type")
        properties = {**_tags(doc.get("tags")), **_meta(doc.get("meta"))}
        out.append(DbtColumn(name, _text(data_type), _text(doc.get("description")), properties))
    return out


def _owners(node: Mapping[str, Any], groups: Mapping[str, Mapping[str, Any]]) -> list[str]:
    meta = {**_dict(node.get("source_meta")), **_dict(_dict(node.get("config")).get("meta")), **_dict(node.get("meta"))}
    owner = meta.get("owner")
    owners = (
        [owner]
        if isinstance(owner, str)
        else [o for o in owner if isinstance(o, str)]
        if isinstance(owner, list)
        else []
    )
    group_owner = _dict(_dict(groups.get(str(node.get("group")))).get("owner"))
    owners += [str(v) for v in (group_owner.get("email"), group_owner.get("name")) if v][:1]
    return list(dict.fromkeys(o[:_MAX_OWNER] for o in owners if o))[:_MAX_OWNERS]


def _properties(node: Mapping[str, Any]) -> dict[str, str]:
    config = _dict(node.get("config"))
    out = {"dbt_unique_id": str(node.get("unique_id")), "dbt_resource_type": str(node.get("resource_type"))}
    for key, value in (
        ("dbt_materialized", config.get("materialized")),
        ("dbt_package", node.get("package_name")),
        ("dbt_group", node.get("group")),
        ("dbt_access", node.get("access")),
        ("dbt_source", node.get("source_name")),
        ("dbt_path", node.get("original_file_path")),
    ):
        if value:
            out[key] = str(value)
    out.update(_tags(node.get("tags")))
    meta = {**_dict(node.get("source_meta")), **_dict(config.get("meta")), **_dict(node.get("meta"))}
    out.update(_meta(meta))
    return {k: v[:_MAX_PROPERTY] for k, v in list(out.items())[:_MAX_PROPERTIES]}


def _tags(tags: Any) -> dict[str, str]:  # noqa: ANN401
    names = sorted({str(t) for t in tags}) if isinstance(tags, list) else []
    return {"dbt_tags": ",".join(names)} if names else {}


def _meta(meta: Any) -> dict[str, str]:  # noqa: ANN401
    out = {}
    for key, value in sorted(_dict(meta).items()):
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        out[f"meta_{key}".replace(".", "_")] = text[:_MAX_PROPERTY]
    return out


def _depends_on(node: Mapping[str, Any]) -> list[str]:
    return [str(u) for u in _dict(node.get("depends_on")).get("nodes") or ()]


def _ephemeral(node: Mapping[str, Any]) -> bool:
    return _dict(node.get("config")).get("materialized") == "ephemeral"


def _text(value: Any) -> str | None:  # noqa: ANN401
    return str(value) if value else None


def _dict(value: Any) -> Mapping[str, Any]:  # noqa: ANN401
    return value if isinstance(value, Mapping) else {}
