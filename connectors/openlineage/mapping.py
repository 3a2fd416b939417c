"""One OpenLineage event (a RunEvent, JobEvent or DatasetEvent of the current spec) -> metalake events.

Pure: the parsed JSON in, the metalake events out, or :class:`InvalidLineage` naming the JSON pointer at fault (and
nothing built). What becomes what (docs/connectors/openlineage.md says the same to users):

* Every dataset of the event (``inputs``, ``outputs``, a DatasetEvent's ``dataset``) becomes a table asset
  (``asset.upserted``; ``view`` when its ``datasetType`` facet says VIEW), named by :mod:`.naming`; a ``symlinks``
  facet's TABLE identifier names it in preference to a storage path (Spark names a Hive or Delta table both ways).
  The ``schema`` facet's fields (nested ones as ``parent.child``) become its columns; ``documentation`` its
  description; ``ownership`` its owners.
* Job and run facts (job namespace and name, run id, eventType, eventTime, producer, parent run, job type, engine)
  become properties of the outputs (the datasets the job wrote), with the dataset's own namespace and name. Inputs
  carry no properties: a metalake upsert replaces the properties as a whole, and a job that only read a dataset must
  not erase the facts of the job that wrote it.
* Lineage: each input -> each output as a table edge, and each DIRECT input field of the ``columnLineage`` facet as a
  column edge, on COMPLETE and RUNNING run events and on JobEvents only. An edge says data flowed: START announces a
  run that may still fail, FAIL and ABORT may have written nothing, while a streaming job reports RUNNING and may
  never complete; a JobEvent declares a job's static lineage. INDIRECT inputs (filters, join keys, group-bys) are no
  edge: no value flows along them, and an edge would spread a PII tag of a join key onto the whole output.

Versions are the eventTime in milliseconds, so a later event about a dataset wins; event ids are derived from the
body's digest and the target, so a resent event produces the same ids (consumers deduplicate). No event removes
anything, blocks a tag or stops propagation: nothing here needs the PII grant (:func:`control.auth.pii.weakening`).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from connectors.openlineage.bounds import TEXT_FLOOR, Budget, InvalidLineage, TooManyEvents
from connectors.openlineage.naming import InvalidName, dataset_urn
from metalake.events import CloudEvent, new_event
from metalake.events.validation import InvalidData
from metalake.urn import AssetUrn

UPSERTED = "io.metalake.asset.upserted.v1"
EDGE_ADDED = "io.metalake.lineage.edge.added.v1"
RUN_STATES = frozenset({"START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"})
EDGE_STATES = frozenset({"COMPLETE", "RUNNING"})
# Free text the event schemas bound: longer values are cut (they describe, they do not identify).
_MAX_TYPE = 1024
_MAX_DESCRIPTION = 65_536
_MAX_PROPERTY = 8192
_MAX_TRANSFORMATION = 1024
_IDS = uuid.UUID("6f1d1c1e-2d3b-5b8e-9c41-0e6a4f0b9a7d")

EventKind = Literal["run", "job", "dataset"]
__all__ = ["InvalidLineage", "Mapped", "TooManyEvents", "body_digest", "map_event"]


@dataclass
class Mapped:
    """The metalake events of one OpenLineage event, in publishing order, and what they are."""

    kind: EventKind
    event_type: str | None
    events: list[CloudEvent] = field(default_factory=list)
    assets: int = 0
    columns: int = 0
    edges: int = 0
    column_edges: int = 0

    def summary(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "eventType": self.event_type,
            "accepted": len(self.events),
            "assets": self.assets,
            "columns": self.columns,
            "edges": self.edges,
            "column_edges": self.column_edges,
        }


def escape(key: str) -> str:
    """A JSON pointer reference token (RFC 6901: ``~`` -> ``~0``, ``/`` -> ``~1``)."""
    return key.replace("~", "~0").replace("/", "~1")


def _obj(value: Any, pointer: str) -> dict[str, Any]:  # noqa: ANN401
    if not isinstance(value, dict):
        raise InvalidLineage(f"{pointer or '/'} must be a JSON object", pointer)
    return value


def _text(obj: Mapping[str, Any], key: str, pointer: str, *, required: bool = True) -> str | None:
    at = f"{pointer}/{escape(key)}"
    value = obj.get(key)
    if value is None:
        if required:
            raise InvalidLineage(f"{at} is required", at)
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise InvalidLineage(f"{at} must be a non-empty string", at)
    return value


def _list(obj: Mapping[str, Any], key: str, pointer: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidLineage(f"{pointer}/{escape(key)} must be a JSON array", f"{pointer}/{escape(key)}")
    return value


def _facet(facets: Mapping[str, Any], name: str, pointer: str) -> dict[str, Any] | None:
    value = facets.get(name)
    return None if value is None else _obj(value, f"{pointer}/facets/{escape(name)}")


def _facets(obj: Mapping[str, Any], pointer: str) -> dict[str, Any]:
    value = obj.get("facets")
    return {} if value is None else _obj(value, f"{pointer}/facets")


def _cut(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _event_time(doc: Mapping[str, Any]) -> datetime:
    raw = _text(doc, "eventTime", "")
    try:
        parsed = datetime.fromisoformat(str(raw))
    except ValueError:
        raise InvalidLineage("/eventTime must be an RFC 3339 date-time", "/eventTime") from None
    if parsed.tzinfo is None:
        raise InvalidLineage("/eventTime must carry a UTC offset (RFC 3339)", "/eventTime")
    return parsed


@dataclass(frozen=True)
class Column:
    name: str
    data_type: str | None
    description: str | None
    pointer: str


@dataclass(frozen=True)
class Dataset:
    """A dataset of the event: its asset and what its facets say."""

    urn: AssetUrn
    namespace: str
    name: str
    pointer: str
    facets: dict[str, Any]
    # The namespace/name it was sent under when a symlink named the table instead.
    location: str | None


def _columns(fields: list[Any], pointer: str, budget: Budget, prefix: str = "", depth: int = 1) -> Iterator[Column]:
    for i, item in enumerate(fields):
        at = f"{pointer}/{i}"
        entry = _obj(item, at)
        name = budget.column_name(prefix, str(_text(entry, "name", at)), at, depth)
        data_type = _text(entry, "type", at, required=False)
        description = _text(entry, "description", at, required=False)
        yield Column(
            name,
            _cut(data_type, _MAX_TYPE) if data_type else None,
            _cut(description, _MAX_DESCRIPTION) if description else None,
            at,
        )
        # Nested fields (structs) are columns of their own, named by their path.
        yield from _columns(_list(entry, "fields", at), f"{at}/fields", budget, f"{name}.", depth + 1)


def _dataset(value: Any, pointer: str) -> Dataset:  # noqa: ANN401
    obj = _obj(value, pointer)
    namespace = str(_text(obj, "namespace", pointer))
    name = str(_text(obj, "name", pointer))
    facets = _facets(obj, pointer)
    target, target_at, location = (namespace, name), f"{pointer}/name", None
    symlinks = _facet(facets, "symlinks", pointer)
    if symlinks is not None:
        at = f"{pointer}/facets/symlinks/identifiers"
        for i, item in enumerate(_list(symlinks, "identifiers", f"{pointer}/facets/symlinks")):
            ident = _obj(item, f"{at}/{i}")
            kind = _text(ident, "type", f"{at}/{i}", required=False) or ""
            if kind.upper() == "TABLE":
                target = (str(_text(ident, "namespace", f"{at}/{i}")), str(_text(ident, "name", f"{at}/{i}")))
                target_at, location = f"{at}/{i}/name", f"{namespace}/{name}"
                break
    try:
        urn = dataset_urn(*target)
    except InvalidName as exc:
        raise InvalidLineage(f"{target_at}: {exc}", target_at) from None
    return Dataset(urn, namespace, name, pointer, facets, location)


@dataclass
class _Builder:
    """Collects the events of one OpenLineage event; the last write of one target wins (outputs after inputs)."""

    tenant: str
    time: datetime
    digest: str
    max_events: int
    budget: Budget
    upserts: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    edges: dict[tuple[str, str], tuple[dict[str, Any], str]] = field(default_factory=dict)

    @property
    def version(self) -> int:
        return int(self.time.timestamp() * 1000)

    def _room(self, pointer: str) -> None:
        if len(self.upserts) + len(self.edges) >= self.max_events:
            raise TooManyEvents(f"the event would become more than {self.max_events} metalake events", pointer)

    def upsert(self, data: dict[str, Any], pointer: str) -> None:
        if data["urn"] not in self.upserts:
            self._room(pointer)
        self.upserts[data["urn"]] = (data, pointer)

    def edge(self, upstream: AssetUrn, downstream: AssetUrn, transformation: str | None, pointer: str) -> bool:
        key = (self.budget.urn(upstream, pointer), self.budget.urn(downstream, pointer))
        if key[0] == key[1] or key in self.edges:
            return False  # a job that rewrites a table in place is no edge
        self._room(pointer)
        data: dict[str, Any] = {"urn": key[1], "upstream": key[0], "version": self.version}
        if transformation:
            data["transformation"] = _cut(transformation, _MAX_TRANSFORMATION)
        self.edges[key] = (data, pointer)
        return True

    def events(self) -> list[CloudEvent]:
        out = []
        for event_type, items in ((UPSERTED, self.upserts.values()), (EDGE_ADDED, self.edges.values())):
            for data, pointer in items:
                target = f"{data['urn']}|{data.get('upstream', '')}"
                event_id = str(uuid.uuid5(_IDS, f"{self.digest}|{event_type}|{target}"))
                try:
                    out.append(
                        new_event(
                            event_type,
                            self.tenant,
                            data,
                            source=f"/tenants/{self.tenant}/openlineage",
                            event_id=event_id,
                            time=self.time,
                        )
                    )
                except InvalidData as exc:
                    raise InvalidLineage(f"{pointer}: not accepted as a metalake event ({exc})", pointer) from None
        return out


def _properties(values: Mapping[str, str | None]) -> dict[str, str]:
    return {key: _cut(value, _MAX_PROPERTY) for key, value in values.items() if value}


def _run_properties(doc: Mapping[str, Any], kind: EventKind, event_type: str | None) -> dict[str, str | None]:
    """The job and run facts every output of the event carries."""
    out: dict[str, str | None] = {
        "openlineage_producer": _text(doc, "producer", ""),
        "openlineage_event_time": str(doc["eventTime"]),
    }
    if kind == "dataset":
        return out
    job = _obj(doc.get("job"), "/job")
    out["openlineage_job_namespace"] = _text(job, "namespace", "/job")
    out["openlineage_job_name"] = _text(job, "name", "/job")
    job_facets = _facets(job, "/job")
    job_type = _facet(job_facets, "jobType", "/job")
    if job_type is not None:
        parts = (_text(job_type, key, "/job/facets/jobType", required=False) for key in ("integration", "jobType"))
        out["openlineage_job_type"] = "/".join(p for p in parts if p) or None
        out["openlineage_job_processing_type"] = _text(
            job_type, "processingType", "/job/facets/jobType", required=False
        )
    if kind == "job":
        return out
    run = _obj(doc.get("run"), "/run")
    run_id = str(_text(run, "runId", "/run"))
    try:
        uuid.UUID(run_id)
    except ValueError:
        raise InvalidLineage("/run/runId must be a UUID", "/run/runId") from None
    out["openlineage_run_id"] = run_id
    out["openlineage_run_event_type"] = event_type
    run_facets = _facets(run, "/run")
    parent = _facet(run_facets, "parent", "/run")
    if parent is not None:
        parent_job = _obj(parent.get("job"), "/run/facets/parent/job")
        parent_run = _obj(parent.get("run"), "/run/facets/parent/run")
        out["openlineage_parent_job_namespace"] = _text(parent_job, "namespace", "/run/facets/parent/job")
        out["openlineage_parent_job_name"] = _text(parent_job, "name", "/run/facets/parent/job")
        out["openlineage_parent_run_id"] = _text(parent_run, "runId", "/run/facets/parent/run")
    engine = _facet(run_facets, "processing_engine", "/run")
    if engine is not None:
        at = "/run/facets/processing_engine"
        parts = (_text(engine, key, at, required=False) for key in ("name", "version"))
        out["openlineage_engine"] = " ".join(p for p in parts if p) or None
    return out


def _dataset_properties(dataset: Dataset) -> dict[str, str | None]:
    out: dict[str, str | None] = {
        "openlineage_namespace": dataset.namespace,
        "openlineage_name": dataset.name,
        "openlineage_location": dataset.location,
    }
    storage = _facet(dataset.facets, "storage", dataset.pointer)
    if storage is not None:
        at = f"{dataset.pointer}/facets/storage"
        out["openlineage_storage_layer"] = _text(storage, "storageLayer", at, required=False)
        out["openlineage_storage_file_format"] = _text(storage, "fileFormat", at, required=False)
    version = _facet(dataset.facets, "version", dataset.pointer)
    if version is not None:
        out["openlineage_dataset_version"] = _text(
            version, "datasetVersion", f"{dataset.pointer}/facets/version", required=False
        )
    return out


def _asset(dataset: Dataset, builder: _Builder, mapped: Mapped, properties: dict[str, str] | None) -> None:
    facets, at = dataset.facets, dataset.pointer
    kind = "table"
    dataset_type = _facet(facets, "datasetType", at)
    if dataset_type is not None:
        declared = _text(dataset_type, "datasetType", f"{at}/facets/datasetType", required=False) or ""
        kind = "view" if declared.upper() == "VIEW" else "table"
    urn = builder.budget.urn(dataset.urn, at)
    data: dict[str, Any] = {"urn": urn, "version": builder.version, "kind": kind, "name": dataset.urn.name}
    documentation = _facet(facets, "documentation", at)
    if documentation is not None:
        text = _text(documentation, "description", f"{at}/facets/documentation", required=False)
        if text:
            data["description"] = _cut(text, _MAX_DESCRIPTION)
    ownership = _facet(facets, "ownership", at)
    if ownership is not None:
        owners_at = f"{at}/facets/ownership/owners"
        owners = _list(ownership, "owners", f"{at}/facets/ownership")
        data["owners"] = [
            str(_text(_obj(o, f"{owners_at}/{i}"), "name", f"{owners_at}/{i}")) for i, o in enumerate(owners)
        ]
    if properties is not None:
        data["properties"] = properties
    if urn not in builder.upserts:
        mapped.assets += 1
    builder.upsert(data, at)
    _schema_columns(dataset, builder, mapped)


def _schema_columns(dataset: Dataset, builder: _Builder, mapped: Mapped) -> None:
    at = dataset.pointer
    schema = _facet(dataset.facets, "schema", at)
    if schema is None:
        return
    fields = _list(schema, "fields", f"{at}/facets/schema")
    for column in _columns(fields, f"{at}/facets/schema/fields", builder.budget):
        urn = builder.budget.urn(dataset.urn.child(column.name), column.pointer)
        col: dict[str, Any] = {"urn": urn, "version": builder.version, "kind": "column", "name": column.name}
        if column.data_type:
            col["data_type"] = column.data_type
        if column.description:
            col["description"] = column.description
        if urn not in builder.upserts:
            mapped.columns += 1
        builder.upsert(col, column.pointer)


def _direct(entry: Mapping[str, Any], at: str) -> tuple[bool, str | None]:
    """Whether an input field flows into the output (no transformations listed: an older facet, direct), and how."""
    transformations = _list(entry, "transformations", at)
    if not transformations:
        return True, None
    for i, item in enumerate(transformations):
        step = _obj(item, f"{at}/transformations/{i}")
        kind = (_text(step, "type", f"{at}/transformations/{i}", required=False) or "").upper()
        if kind == "DIRECT":
            subtype = _text(step, "subtype", f"{at}/transformations/{i}", required=False)
            how = f"DIRECT/{subtype}" if subtype else "DIRECT"
            # A masked value (a hash of an email) still derives from its input: the edge stays, PII still spreads.
            return True, f"{how} (masking)" if step.get("masking") is True else how
    return False, None


def _column_edges(output: Dataset, urns: Mapping[tuple[str, str], AssetUrn], builder: _Builder, mapped: Mapped) -> None:
    facet = _facet(output.facets, "columnLineage", output.pointer)
    if facet is None:
        return
    at = f"{output.pointer}/facets/columnLineage/fields"
    for out_field, value in _obj(facet.get("fields", {}), at).items():
        field_at = f"{at}/{escape(out_field)}"
        spec = _obj(value, field_at)
        described = _text(spec, "transformationDescription", field_at, required=False)
        for i, item in enumerate(_list(spec, "inputFields", field_at)):
            input_at = f"{field_at}/inputFields/{i}"
            entry = _obj(item, input_at)
            namespace = str(_text(entry, "namespace", input_at))
            name = str(_text(entry, "name", input_at))
            column = str(_text(entry, "field", input_at))
            direct, how = _direct(entry, input_at)
            if not direct:
                continue
            upstream = urns.get((namespace, name))
            if upstream is None:
                try:
                    upstream = dataset_urn(namespace, name)
                except InvalidName as exc:
                    raise InvalidLineage(f"{input_at}/name: {exc}", f"{input_at}/name") from None
            if builder.edge(upstream.child(column), output.urn.child(out_field), described or how, input_at):
                mapped.column_edges += 1


def _kind(doc: Mapping[str, Any]) -> EventKind:
    # The spec tells the three apart by their required members (and schemaURL, which producers pin to a version).
    if "run" in doc:
        return "run"
    if "dataset" in doc:
        return "dataset"
    if "job" in doc:
        return "job"
    raise InvalidLineage("the event is neither a RunEvent (run, job), a JobEvent (job) nor a DatasetEvent", "/")


def map_event(value: Any, tenant: str, digest: str, *, max_events: int, max_text: int = TEXT_FLOOR) -> Mapped:  # noqa: ANN401
    """The metalake events of one OpenLineage event for ``tenant``; raises :class:`InvalidLineage` or
    :class:`TooManyEvents`. ``digest`` identifies the body (event ids are derived from it); ``max_text`` bounds the
    names and URNs it may build (:func:`connectors.openlineage.bounds.text_budget` of the body)."""
    doc = _obj(value, "")
    kind = _kind(doc)
    _text(doc, "schemaURL", "")
    time = _event_time(doc)
    event_type: str | None = None
    if kind == "run":
        raw = _text(doc, "eventType", "", required=False)
        if raw is not None and raw not in RUN_STATES:
            raise InvalidLineage(f"/eventType must be one of {', '.join(sorted(RUN_STATES))}", "/eventType")
        event_type = raw or "OTHER"
    mapped = Mapped(kind, event_type)
    builder = _Builder(tenant, time, digest, max_events, Budget(max_text))
    facts = _run_properties(doc, kind, event_type)
    if kind == "dataset":
        dataset = _dataset(doc.get("dataset"), "/dataset")
        _asset(dataset, builder, mapped, _properties({**_dataset_properties(dataset), **facts}))
        mapped.events = builder.events()
        return mapped
    inputs = [_dataset(v, f"/inputs/{i}") for i, v in enumerate(_list(doc, "inputs", ""))]
    outputs = [_dataset(v, f"/outputs/{i}") for i, v in enumerate(_list(doc, "outputs", ""))]
    for dataset in inputs:
        _asset(dataset, builder, mapped, None)
    for dataset in outputs:
        _asset(dataset, builder, mapped, _properties({**_dataset_properties(dataset), **facts}))
    if kind == "job" or event_type in EDGE_STATES:
        job = f"openlineage job {facts['openlineage_job_namespace']}/{facts['openlineage_job_name']}"
        for output in outputs:
            for dataset in inputs:
                if builder.edge(dataset.urn, output.urn, job, output.pointer):
                    mapped.edges += 1
        urns = {(d.namespace, d.name): d.urn for d in inputs}
        for output in outputs:
            _column_edges(output, urns, builder, mapped)
    mapped.events = builder.events()
    return mapped


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()
