"""``metalake demo``: the whole flow on the local stack, step by step with timings.

The admin API creates a tenant and a signed-webhook subscription to a receiver the demo runs on loopback; a catalog
(two tables, their columns, a column->column lineage edge) is published to Kafka; a column is tagged PII through the
API; then the demo shows the classification and the propagated tag in MongoDB (through the API) and in Trino, the
webhooks received with their signatures verified, a SQL query through the API as the tenant, and the Delta tables
with the dead letter of an invalid record. The inbound side too: a Monte Carlo connector configured through the API
(its signing secret generated, never printed) receives a signed incident webhook at the connector worker, and the
incident shows on the asset (API), in Trino and at the webhook receiver. Needs ``metalake stack up
--with-processors`` (which starts the connector worker, ``connect``).
"""

from __future__ import annotations

import functools
import secrets
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx
import trino
from trino.dbapi import Cursor

from metalake.events import spec_for
from metalake.kafka import EventProducer, PublishError
from metalake.trino_admin import admin_cursor
from ops.demo import montecarlo
from ops.demo.api_client import ApiClient, ApiError, admin_file, load_or_create_admin
from ops.demo.catalog import Catalog, demo_catalog, invalid_record
from ops.demo.receiver import Delivery, WebhookReceiver
from ops.settings import Settings
from tenants.naming import TRINO_POOLED_SCHEMA, TenantNames, names_for
from tenants.trino_schemas import trino_schema

Echo = Callable[[str], None]
T = TypeVar("T")
SUBSCRIPTION = "demo-webhook"


class DemoError(RuntimeError):
    pass


class Steps:
    """Numbered steps, each printed with how long it took."""

    def __init__(self, echo: Echo) -> None:
        self.echo = echo
        self._n = 0
        self.started = time.monotonic()

    @contextmanager
    def step(self, title: str) -> Iterator[None]:
        self._n += 1
        self.echo(f"\n[{self._n}] {title}")
        t0 = time.monotonic()
        yield
        self.echo(f"    ({time.monotonic() - t0:.1f}s)")


def wait_for(what: str, check: Callable[[], T | None], timeout_s: float, logs: str, echo: Echo) -> T:
    """Poll ``check`` until it returns something; on timeout name what did not arrive and the logs to read."""
    t0 = time.monotonic()
    while True:
        found = check()
        if found is not None and found is not False:
            echo(f"    {what}: after {time.monotonic() - t0:.1f}s")
            return found
        if time.monotonic() - t0 > timeout_s:
            raise DemoError(
                f"{what}: did not arrive within {timeout_s:.0f}s. Check `metalake stack status` and read "
                + " and ".join(f"`metalake stack logs {svc}`" for svc in logs.split())
            )
        time.sleep(0.5)


def run_demo(settings: Settings, tenant: str | None, *, timeout_s: float, echo: Echo) -> None:
    tenant = tenant or f"demo-{secrets.token_hex(3)}"
    steps = Steps(echo)
    api = ApiClient(f"http://{settings.api.host}:{settings.api.port}")
    try:
        _admin(settings, api, steps)
        _create_tenant(api, tenant, steps, timeout_s)
        with WebhookReceiver(secrets.token_urlsafe(24)) as receiver:
            _subscribe(api, tenant, receiver, steps)
            names = names_for(tenant, settings.lake_root)
            catalog = demo_catalog(tenant, time.time_ns() // 1_000_000)
            _publish(settings, names, catalog, steps, timeout_s, api)
            _tag(api, tenant, catalog, steps, timeout_s)
            mc_secret = _montecarlo_connector(api, tenant, steps)
            incident = _send_incident(settings, tenant, mc_secret, catalog, steps, timeout_s)
            _show_incident(api, tenant, catalog, incident, steps, timeout_s)
            _show_trino(settings, names, catalog, steps, timeout_s, incident)
            _show_webhooks(api, tenant, receiver, catalog, steps, timeout_s, incident)
        _sql_as_tenant(api, tenant, steps)
    except ApiError as exc:
        raise DemoError(str(exc)) from exc
    finally:
        api.close()
    echo(f"\nDone in {time.monotonic() - steps.started:.1f}s (tenant {tenant}).")
    echo("Explore: metalake stack status | metalake stack logs <api|stream|propagation|outbound|access|connect>")


def _admin(settings: Settings, api: ApiClient, steps: Steps) -> None:
    with steps.step("Platform-admin API client and token"):
        client_id, secret, created = load_or_create_admin(settings)
        try:
            token = api.token(client_id, secret)
        except ApiError as exc:
            if created or exc.status != 401:
                raise
            # The stored client is gone (e.g. a wiped .stack/data): make a new one.
            admin_file(settings).unlink()
            client_id, secret, created = load_or_create_admin(settings)
            token = api.token(client_id, secret)
        how = "created (secret stored once in" if created else "reused (secret in"
        steps.echo(f"    client {client_id} {how} {admin_file(settings)}, owner-only, never printed)")
        steps.echo(f"    token: {token['token_type']}, expires in {token['expires_in']}s, scope {token.get('scope')}")


def _create_tenant(api: ApiClient, tenant: str, steps: Steps, timeout_s: float) -> None:
    with steps.step(f"Create tenant {tenant!r} through the API (POST /v1/tenants)"):
        resp = api.call("POST", "/v1/tenants", json={"id": tenant, "display_name": "metalake demo"}, expect=(202, 409))
        steps.echo("    created; provisioning" if resp.status_code == 202 else "    exists already; reusing it")

        def active() -> dict[str, Any] | None:
            view: dict[str, Any] = api.json("GET", f"/v1/tenants/{tenant}")
            return view if view.get("state") == "active" else None

        wait_for("tenant state active (topics, Delta tables, Trino schema)", active, timeout_s, "api", steps.echo)


def _subscribe(api: ApiClient, tenant: str, receiver: WebhookReceiver, steps: Steps) -> None:
    with steps.step(f"Signed-webhook subscription {SUBSCRIPTION!r} to the demo's receiver {receiver.url}"):
        body = {
            "destination": "webhook",
            "config": {"url": receiver.url},
            "secrets": {"key_id": "demo", "secret": receiver.secret},
            # Without filters a webhook gets every change (each asset); these are the tag changes and the incidents.
            "filters": {"event_types": ["classification.*", "tag.*", "propagation.*", "incidents.*"]},
        }
        path = f"/v1/tenants/{tenant}/subscriptions"
        resp = api.call("POST", path, json={"name": SUBSCRIPTION, **body}, expect=(201, 200, 409))
        if resp.status_code == 409:  # a rerun on the same tenant: point it at this run's receiver and secret
            update = {k: v for k, v in body.items() if k != "destination"}
            api.call("PATCH", f"{path}/{SUBSCRIPTION}", json={**update, "enabled": True})
        steps.echo(f"    {'updated' if resp.status_code == 409 else 'created'}; filters: {body['filters']}")


def _publish(
    settings: Settings, names: TenantNames, catalog: Catalog, steps: Steps, timeout_s: float, api: ApiClient
) -> None:
    tenant = names.tenant_id
    with steps.step(f"Publish the catalog to Kafka ({len(catalog.events)} events) and 1 invalid record"):
        try:
            with EventProducer(settings) as producer:
                deliveries = producer.publish(
                    catalog.events, lambda e: names.topic(spec_for(e.type).topic_class(e.data))
                )
                producer.publish_raw([invalid_record(tenant, names.priority_topic)])
        except PublishError as exc:
            raise DemoError(f"Kafka did not confirm the events: {exc}. Read `metalake stack logs kafka`") from exc
        for d, e in zip(deliveries, catalog.events, strict=True):
            label = e.data.get("kind") or "lineage"
            steps.echo(f"    {label:8} {e.data['urn']}  -> {d.topic}[{d.partition}]@{d.offset}")

        def edge_in_mongo() -> dict[str, Any] | None:
            return downstream_edges(api, tenant, catalog.pii_column)

        def asset_in_mongo() -> bool:
            path = f"/v1/tenants/{tenant}/assets"
            resp = api.call("GET", path, params={"urn": catalog.downstream_column}, expect=(200, 404))
            # This run's version, not a previous run's (a rerun on the same tenant).
            return resp.is_success and (resp.json().get("version") or 0) >= catalog.version

        wait_for("assets in MongoDB (GET .../assets)", asset_in_mongo, timeout_s, "stream", steps.echo)
        wait_for("lineage edge in MongoDB (GET .../assets/lineage)", edge_in_mongo, timeout_s, "stream", steps.echo)
        steps.echo(f"    lineage: {catalog.pii_column} -> {catalog.downstream_column}")


def downstream_edges(api: ApiClient, tenant: str, urn: str) -> dict[str, Any] | None:
    """The asset's downstream lineage once it has an edge; None while it has none, or while the asset itself is not
    in MongoDB yet (404): the demo waits for the downstream column, and the upstream one can arrive later (another
    partition of the bulk topic)."""
    params = {"urn": urn, "direction": "downstream", "depth": 1}
    resp = api.call("GET", f"/v1/tenants/{tenant}/assets/lineage", params=params, expect=(200, 404))
    if resp.status_code == 404:
        return None
    view: dict[str, Any] = resp.json()
    return view if view["edges"] else None


def _tags(api: ApiClient, tenant: str, urn: str, field: str, source: str | None = None) -> list[dict[str, Any]]:
    view = api.json("GET", f"/v1/tenants/{tenant}/assets", params={"urn": urn})
    return [t for t in view.get(field) or [] if t.get("tag") == "PII" and source in (None, t.get("source"))]


def _tag(api: ApiClient, tenant: str, catalog: Catalog, steps: Steps, timeout_s: float) -> None:
    with steps.step(f"Tag {catalog.pii_column} PII through the API (POST .../assets/tags)"):
        if _tags(api, tenant, catalog.pii_column, "tags"):
            # A rerun on the same tenant: untag first, so tagging is a change again (propagation, webhooks).
            params = {"urn": catalog.pii_column, "tag": "PII"}
            api.call("DELETE", f"/v1/tenants/{tenant}/assets/tags", params=params, expect=(202,))
            wait_for(
                "removal of the previous run's tag and its propagation",
                lambda: not _tags(api, tenant, catalog.downstream_column, "propagated_tags"),
                timeout_s,
                "propagation stream",
                steps.echo,
            )
        accepted = api.json(
            "POST", f"/v1/tenants/{tenant}/assets/tags", json={"urn": catalog.pii_column, "tag": "PII"}, expect=(202,)
        )
        steps.echo(f"    accepted: {accepted['type']} {accepted['event_id']}")
        tags = wait_for(
            "classification in MongoDB (GET .../assets?urn=<column>)",
            lambda: _tags(api, tenant, catalog.pii_column, "tags", source="human") or None,
            timeout_s,
            "stream",
            steps.echo,
        )
        steps.echo(f"    {catalog.pii_column}: tags {[(t['tag'], t.get('source')) for t in tags]}")
        propagated = wait_for(
            "propagated tag in MongoDB on the downstream column",
            lambda: _tags(api, tenant, catalog.downstream_column, "propagated_tags") or None,
            timeout_s,
            "propagation stream",
            steps.echo,
        )
        for p in propagated:
            steps.echo(
                f"    {catalog.downstream_column}: propagated {p['tag']} from {p.get('origin')} depth {p.get('depth')}"
            )


def _montecarlo_connector(api: ApiClient, tenant: str, steps: Steps) -> str:
    """Create (or, on a rerun, replace) the tenant's Monte Carlo connector and activate a generated signing secret;
    the secret, shown once in the API's answer, is kept in memory only (it is what one pastes into Monte Carlo)."""
    name = montecarlo.CONNECTOR
    with steps.step(
        f"Monte Carlo connector {name!r} through the connectors API (POST /v1/tenants/{tenant}/connectors)"
    ):
        path = f"/v1/tenants/{tenant}/connectors"
        config = montecarlo.connector_config()
        spec = {"type": montecarlo.TYPE, "config": config}
        resp = api.call("POST", path, json={"name": name, **spec}, expect=(201, 409))
        if resp.status_code == 409:  # a rerun on the same tenant: the same configuration again
            api.call("PUT", f"{path}/{name}", json=spec)
        steps.echo(f"    {'created' if resp.status_code == 201 else 'exists already; configuration replaced'}")
        for warehouse, target in config["warehouses"].items():
            steps.echo(
                f"    warehouse map: Monte Carlo warehouse {warehouse} -> {target['platform']}:{target['instance']}"
            )
        # No secret in the request: the API generates one and shows it in this answer only. A rerun's previous
        # secret is retired at once (overlap 0): the demo is its only sender.
        rotated = api.json("POST", f"{path}/{name}/secrets", json={"overlap_seconds": 0}, expect=(201,))
        steps.echo(f"    signing secret {rotated['id']} generated (kept in memory for the sender, never printed)")
        secret: str = rotated["secret"]
        return secret


def _send_incident(
    settings: Settings, tenant: str, secret: str, catalog: Catalog, steps: Steps, timeout_s: float
) -> montecarlo.Incident:
    connect = settings.connect
    url = f"http://{connect.host}:{connect.port}/webhooks/{montecarlo.SLUG}/{urllib.parse.quote(tenant, safe='')}"
    incident = montecarlo.incident("public", "customers", "customers: 0 rows added in the last 24 hours")
    with steps.step(f"A signed Monte Carlo incident webhook to the connector worker (POST {url})"):
        steps.echo(f"    incident {incident.incident_id} on {incident.full_table_id} (x-mcd-signature: HMAC-SHA512)")
        headers = montecarlo.signed_headers(secret, incident.body)

        def accepted() -> dict[str, Any] | None:
            try:
                resp = httpx.post(url, content=incident.body, headers=headers, timeout=30)
            except httpx.HTTPError as exc:
                raise DemoError(
                    f"POST {url}: {type(exc).__name__}; is the connector worker up? Start it with `metalake stack up "
                    "connect`; read `metalake stack logs connect`"
                ) from exc
            if resp.status_code == 401:
                return None  # the worker may still hold the connector's previous secrets (connect.lookup_cache_ttl_s)
            if resp.status_code not in (200, 202):
                raise DemoError(
                    f"POST {url} answered {resp.status_code}: {resp.text[:300]}; see metalake stack logs connect"
                )
            body: dict[str, Any] = resp.json()
            return body

        answer = wait_for("accepted by the worker (Kafka confirmed)", accepted, timeout_s, "connect", steps.echo)
        steps.echo(f"    answer: {answer.get('status')}, events {answer.get('events')}")
    return incident


def _show_incident(
    api: ApiClient, tenant: str, catalog: Catalog, incident: montecarlo.Incident, steps: Steps, timeout_s: float
) -> None:
    with steps.step(f"The incident on {catalog.customers} through the API (GET .../assets/incidents, .../assets)"):

        def listed() -> dict[str, Any] | None:
            # Open ones only, a full page: a tenant the demo ran on many times keeps each run's incident.
            params = {"urn": catalog.customers, "state": "open", "limit": 500}
            page = api.json("GET", f"/v1/tenants/{tenant}/assets/incidents", params=params)
            return next((i for i in page["items"] if i["incident_id"] == incident.incident_id), None)

        found = wait_for(
            "incident in MongoDB (GET .../assets/incidents?urn=<table>)",
            listed,
            timeout_s,
            "stream connect",
            steps.echo,
        )
        steps.echo(
            f"    {found['incident_id']}: {found.get('status')}, {found.get('incident_type')}, {found.get('summary')}"
        )
        steps.echo(f"    {found.get('url')}")

        def degraded() -> dict[str, Any] | None:
            view: dict[str, Any] = api.json("GET", f"/v1/tenants/{tenant}/assets", params={"urn": catalog.customers})
            return view if incident.incident_id in (view.get("open_incident_ids") or []) else None

        asset = wait_for("the asset's health (GET .../assets?urn=<table>)", degraded, timeout_s, "stream", steps.echo)
        steps.echo(
            f"    health {asset.get('health')} ({asset.get('open_incidents')} open incident(s), "
            f"severity {asset.get('health_severity') or '-'}); owners {asset.get('owners')}"
        )


def _show_trino(
    settings: Settings,
    names: TenantNames,
    catalog: Catalog,
    steps: Steps,
    timeout_s: float,
    incident: montecarlo.Incident,
) -> None:
    schema = trino_schema(settings, names.tenant_id)
    with (
        admin_cursor(settings) as cur,
        steps.step(f"The same in Trino (lake.{schema}, the Delta tables the stream job writes)"),
    ):
        # S608 below: the only identifiers put into SQL are the schema, from the validated tenant id, and fixed
        # table names; values are parameters.
        for table, urn in (("classifications", catalog.pii_column), ("propagated_tags", catalog.downstream_column)):
            sql = f'SELECT urn, tag FROM "{schema}"."{table}" WHERE urn = ? AND tag = ?'  # noqa: S608
            wait_for(
                f"{table} row in Trino",
                functools.partial(_rows, cur, sql, [urn, "PII"]),
                timeout_s,
                "stream",
                steps.echo,
            )
            steps.echo(f"    {table}: {urn} PII")
        sql = f'SELECT status, urn FROM "{schema}"."incidents" WHERE incident_id = ?'  # noqa: S608
        found = wait_for(
            "incidents row in Trino",
            functools.partial(_rows, cur, sql, [incident.incident_id]),
            timeout_s,
            "stream",
            steps.echo,
        )
        steps.echo(f"    incidents: {incident.incident_id} {found[0][0]} on {found[0][1]}")
        sql = f'SELECT health, open_incidents FROM "{schema}"."assets" WHERE urn = ?'  # noqa: S608
        health = _rows(cur, sql, [catalog.customers]) or [["-", "-"]]
        steps.echo(f"    assets: {catalog.customers} health {health[0][0]}, {health[0][1]} open incident(s)")
        wait_for(
            "dead letter of the invalid record in Trino",
            lambda: _rows(cur, f'SELECT reason FROM "{schema}"."_dlq" LIMIT 1', []),  # noqa: S608
            timeout_s,
            "stream",
            steps.echo,
        )
        where = "shared by the pooled tenants, rows keyed by tenant" if not names.dedicated else "its own"
        steps.echo(f"    Delta tables ({where}):")
        for table in ("events", "assets", "lineage_edges", "classifications", "propagated_tags", "incidents", "_dlq"):
            lake_table = names.table(table)
            rows = _rows(cur, f'SELECT count(*) FROM "{schema}"."{table}"', []) or [[0]]  # noqa: S608
            # A pooled tenant's tables are views: the shared table's history is the platform's to read.
            history = (
                f'"{TRINO_POOLED_SCHEMA}"."{table}$history"' if lake_table.shared else f'"{schema}"."{table}$history"'
            )
            commits = _rows(cur, f"SELECT max(version) FROM {history}", []) or [[None]]  # noqa: S608
            steps.echo(f"      {table:16} {rows[0][0]:6} rows, Delta version {commits[0][0]} at {lake_table.path}")
        dlq = _rows(cur, f'SELECT reason FROM "{schema}"."_dlq" ORDER BY ingested_at DESC LIMIT 1', [])  # noqa: S608
        steps.echo(f"    newest dead letter: {dlq[0][0] if dlq else '-'}")


def _rows(cur: Cursor, sql: str, params: list[Any]) -> list[list[Any]] | None:
    try:
        cur.execute(sql, params)
        rows: list[list[Any]] = cur.fetchall()
    except trino.exceptions.TrinoUserError:
        return None  # schema or table not registered yet
    return rows or None


def _show_webhooks(  # noqa: PLR0913
    api: ApiClient,
    tenant: str,
    receiver: WebhookReceiver,
    catalog: Catalog,
    steps: Steps,
    timeout_s: float,
    incident: montecarlo.Incident,
) -> None:
    with steps.step("Signed webhooks received by the demo's receiver (signatures verified)"):
        wanted = {
            ("classification.added", catalog.pii_column),
            ("propagation.completed", catalog.pii_column),
            ("tag.propagated", catalog.downstream_column),
        }

        def arrived() -> list[Delivery] | None:
            got = receiver.deliveries()
            # This run's incident, not a previous run's (still open on the same table, changed again by this run's).
            mine = any(d.kind == "incidents.changed" and d.incident_id == incident.incident_id for d in got)
            return got if mine and wanted <= {(d.kind, d.asset) for d in got} else None

        got = wait_for(
            "webhooks " + ", ".join([*(kind for kind, _ in sorted(wanted)), "incidents.changed"]),
            arrived,
            timeout_s,
            "outbound propagation",
            steps.echo,
        )
        for d in got:
            what = d.tag or (f"{d.incident_id} {d.status}" if d.incident_id else "")
            steps.echo(f"    {d.kind:22} {d.asset or '-'} {what}: {d.reason}")
        bad = [d for d in got if not d.verified]
        if bad:
            raise DemoError(
                f"{len(bad)} webhook(s) failed verification ({bad[0].reason}); read `metalake stack logs outbound`"
            )
        # The receiver stops with the demo: later changes of this tenant must not be retried against it.
        api.call("PATCH", f"/v1/tenants/{tenant}/subscriptions/{SUBSCRIPTION}", json={"enabled": False})
        steps.echo(f"    subscription {SUBSCRIPTION!r} disabled (the receiver stops with the demo)")


def _sql_as_tenant(api: ApiClient, tenant: str, steps: Steps) -> None:
    with steps.step("SQL through the API as the tenant (a read-only client): propagated tags, incidents"):
        client = api.json(
            "POST",
            f"/v1/tenants/{tenant}/clients",
            json={"name": "demo-reader", "role": "read-only"},
            expect=(201, 200),
        )
        reader = ApiClient(api.base_url)
        try:
            token = reader.token(client["client_id"], client["client_secret"])
            steps.echo(f"    client {client['client_id']} scope {token.get('scope')}")
            sql = "SELECT urn, tag, origin, depth FROM propagated_tags ORDER BY urn"
            result = reader.json("POST", f"/v1/tenants/{tenant}/sql", json={"sql": sql, "format": "json"})
            # The tenant's incidents are a table like the others (one row per incident and table).
            incidents_sql = "SELECT incident_id, status, urn FROM incidents ORDER BY incident_id"
            incidents = reader.json("POST", f"/v1/tenants/{tenant}/sql", json={"sql": incidents_sql, "format": "json"})
        finally:
            reader.close()
            # One reader per run: revoke it so reruns do not pile up clients.
            api.call("DELETE", f"/v1/tenants/{tenant}/clients/{client['client_id']}", expect=(204, 200))
        for query, answer in ((sql, result), (incidents_sql, incidents)):
            steps.echo(f"    POST /v1/tenants/{tenant}/sql  {query}")
            steps.echo("    " + " | ".join(c["name"] for c in answer["columns"]))
            for row in answer["rows"]:
                steps.echo("    " + " | ".join(str(v) for v in row))
