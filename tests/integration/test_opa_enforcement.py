"""PII enforced live in a customer's own Trino (docs/enforcement.md), on the real stack.

A second Trino (the "customer's", :mod:`customer_trino`) reads a PostgreSQL database of the stack through its
``warehouse`` catalog, with OPA access control pointed at the admin API (this tree's, served on its own port). The
database is crawled by the real PostgreSQL crawler (its records published as the connector runtime publishes them),
its ``email`` column tagged PII and its ``consent`` column tagged ``consent`` through events; the pooled stream job
projects them, the propagation processor carries them to the view's columns. Then, through the customer's Trino:
masked and filtered for an analyst, in the table and the view; clear for the engine's PII user; clear again soon after
the tag is removed; and refused once the engine is removed. Another tenant's engine key reads none of this tenant's
decisions. The Trino runs the registration's two-file configuration (restrictive file-based rules and OPA), and no
path around the masks is open: impersonating the PII user, `SET SESSION AUTHORIZATION`, a pass-through table
function, the catalog's `execute` procedure, writes, and other users' query texts in `system.runtime.queries`.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient

from api.app import create_app
from connectors.postgres import PostgresCatalogConfig, PostgresCatalogConnector
from control.connectors.plugin import ConnectorContext, SourceAccess
from metalake.events import new_event
from metalake.net.ssrf import AddressGuard
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import names_for
from tests._support.customer_trino import ApiServer, CustomerTrino
from tests._support.itest import wait_for
from tests._support.lakeit import publish
from tests._support.pgit import scratch_database
from tests._support.pipeline_procs import PropagationProcess
from tests._support.tokens import api_settings, auth_headers

pytestmark = pytest.mark.integration

# Movable, as the stack's ports are (a second stack on one host).
TRINO_PORT = int(os.environ.get("METALAKE_IT_OPA_TRINO_PORT", "18480"))
API_PORT = int(os.environ.get("METALAKE_IT_OPA_API_PORT", "18481"))
INSTANCE = "customer-pg"
SOURCE = "/tests/opa"
_POPULATE = """
CREATE TABLE public.people (id int PRIMARY KEY, name text, email text, city varchar(3), consent boolean);
INSERT INTO public.people VALUES
  (1, 'Ada', 'ada@example.org', 'OSL', true),
  (2, 'Bob', 'bob@example.org', 'ROM', false),
  (3, 'Cy', 'cy@example.org', 'LIM', true);
CREATE VIEW public.people_v AS SELECT id, city AS town, consent AS opted_in FROM public.people;
"""
TABLE = "SELECT id, email, city FROM warehouse.public.people ORDER BY id"
VIEW = "SELECT id, town FROM warehouse.public.people_v ORDER BY id"
CLEAR = [[1, "ada@example.org", "OSL"], [2, "bob@example.org", "ROM"], [3, "cy@example.org", "LIM"]]
VIEW_CLEAR = [[1, "OSL"], [2, "ROM"], [3, "LIM"]]
# The stack's PostgreSQL trusts loopback: what the local stack lets connectors reach, never the default.
LOCAL = SourceAccess(AddressGuard.from_settings(["127.0.0.0/8"]), allow_passwordless=True)


class Setup:
    def __init__(self, api: TestClient, tenant: str, database: str, trino: CustomerTrino, engine: dict[str, Any]):
        self.api, self.tenant, self.database, self.trino, self.engine = api, tenant, database, trino, engine

    def urn(self, *path: str) -> str:
        return asset_urn("postgres", INSTANCE, self.database, "public", *path)


def _tag(tenant: str, urn: str, tag: str, version: int, *, removed: bool = False) -> Any:
    data: dict[str, Any] = {"urn": urn, "version": version, "tag": tag}
    if removed:
        return new_event("io.metalake.classification.removed.v1", tenant, data, source=SOURCE)
    data.update(source="human", propagate=True)
    return new_event("io.metalake.classification.added.v1", tenant, data, source=SOURCE)


def crawl(settings: Settings, tenant: str, database: str) -> int:
    """The real crawler's records for the database, published as the connector runtime publishes them."""
    config = PostgresCatalogConfig(
        host="127.0.0.1",
        port=settings.stack.ports.postgres,
        user="metalake",
        password="unused-trust",
        instance=INSTANCE,
        databases=[database],
        sslmode="disable",  # the stack's PostgreSQL has no TLS: the explicit opt-out from verify-full
    )
    records = list(PostgresCatalogConnector(config, ConnectorContext(tenant, "pg", access=LOCAL)).poll({}))
    publish(settings, [r.event for r in records])
    return len(records)


@pytest.fixture(scope="module")
def setup(
    settings: Settings,
    stack: StackManager,
    mongo: MongoClient[dict[str, Any]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Setup]:
    tenant = f"it-{secrets.token_hex(4)}"
    work = tmp_path_factory.mktemp("opa")
    app = create_app(api_settings(settings, issuer=f"http://127.0.0.1:{API_PORT}"), mongo=mongo)
    server = ApiServer(app, API_PORT).start()
    propagation = PropagationProcess(tenant, work / "propagation.log", f"it-opa-{tenant}")
    try:
        with scratch_database(settings, _POPULATE) as database:
            api = TestClient(app)
            admin = auth_headers(api, tenant=tenant, role="admin")
            body = {
                "name": "customer-trino",
                "catalogs": [
                    {"catalog": "warehouse", "platform": "postgres", "instance": INSTANCE, "database": database}
                ],
                "pii_users": ["dpo"],
                "consent_tag": "consent",
                "impersonators": ["gateway"],
                "operators": ["ops"],
            }
            created = api.post(f"/v1/tenants/{tenant}/engines", json=body, headers=admin)
            assert created.status_code == 201, created.text
            engine = created.json()
            # Installed as handed out: the file-based rules beside the OPA access control.
            trino = CustomerTrino(
                settings, work, port=TRINO_PORT, database=database, access_control=None, files=engine["trino_files"]
            ).start()
            try:
                assert crawl(settings, tenant, database) > 0
                propagation.wait_ready()
                trino.wait_ready()
                yield Setup(api, tenant, database, trino, engine)
            finally:
                trino.stop()
    finally:
        propagation.stop()
        server.stop()
        mongo.drop_database(names_for(tenant, settings.lake_root).mongo_database)


def test_pii_masked_and_rows_filtered_in_the_customer_trino_live(
    settings: Settings, setup: Setup, mongo: MongoClient[dict[str, Any]]
) -> None:
    s, trino = setup, setup.trino
    db = mongo[names_for(s.tenant, settings.lake_root).mongo_database]
    # The crawl reached MongoDB, with its view lineage (people.city -> people_v.town).
    wait_for("the view's column lineage", lambda: db["lineage"].find_one({"urn": s.urn("people_v", "town")}), 300)
    # The stream job classified `email` PII by its name when the crawl catalogued it: masked for the analyst at once.
    auto = [[1, "****", "OSL"], [2, "****", "ROM"], [3, "****", "LIM"]]
    wait_for("the auto-classified email masked", lambda: trino.query("analyst", TABLE) == auto or None, 60, 0.2)
    assert trino.query("dpo", TABLE) == CLEAR  # the engine's PII user: clear
    assert trino.query("analyst", VIEW) == VIEW_CLEAR  # nothing tagged reaches the view yet

    # A person tags `city` PII and `consent` as the consent column; both spread along lineage to the view.
    published = time.monotonic()
    publish(
        settings,
        [_tag(s.tenant, s.urn("people", "city"), "PII", 10), _tag(s.tenant, s.urn("people", "consent"), "consent", 10)],
    )
    # Bob did not consent: the analyst does not see his row. `city` is a varchar(3): its mask is cast to fit.
    masked = [[1, "****", "***"], [3, "****", "***"]]
    wait_for("the analyst's table masked", lambda: trino.query("analyst", TABLE) == masked or None, 120, 0.2)
    print(f"\ntag -> masked in the customer Trino: {time.monotonic() - published:.2f}s")
    assert trino.query("dpo", TABLE) == CLEAR  # clear, every row
    # The view: the tags reached its columns along the crawled lineage (propagated), so it is masked and filtered too.
    view_masked = [[1, "***"], [3, "***"]]
    wait_for("the analyst's view masked", lambda: trino.query("analyst", VIEW) == view_masked or None, 120, 0.2)
    town = db["propagated_tags"].find_one({"urn": s.urn("people_v", "town"), "tag": "PII", "deleted": False})
    assert town is not None and town["origin"] == s.urn("people", "city")
    assert trino.query("dpo", VIEW) == VIEW_CLEAR

    # Untag: clear again within seconds (decisions cache a table's tags for enforcement.cache_ttl_s).
    removed = time.monotonic()
    publish(settings, [_tag(s.tenant, s.urn("people", "city"), "PII", 11, removed=True)])
    unmasked = [[1, "****", "OSL"], [3, "****", "LIM"]]
    wait_for("the analyst's city clear", lambda: trino.query("analyst", TABLE) == unmasked or None, 60, 0.2)
    print(f"untag -> clear in the customer Trino: {time.monotonic() - removed:.2f}s")
    wait_for("the view's town clear", lambda: trino.query("analyst", VIEW) == [[1, "OSL"], [3, "LIM"]] or None, 60)


def test_no_path_around_the_masks(settings: Settings, setup: Setup, mongo: MongoClient[dict[str, Any]]) -> None:
    s, trino = setup, setup.trino
    masked = [[1, "****", "OSL"], [3, "****", "LIM"]]  # after the previous test: email PII, Bob's row filtered
    wait_for("the analyst's table masked", lambda: trino.query("analyst", TABLE) == masked or None, 60, 0.2)
    # A consent tag on a column the table does not have: the filter never names it (Trino lists the table's columns
    # in the column-masks request it sends first), so the analyst's queries keep working, filtered as before.
    publish(settings, [_tag(s.tenant, s.urn("people", "ghost"), "consent", 30)])
    db = mongo[names_for(s.tenant, settings.lake_root).mongo_database]
    wait_for("the ghost tag projected", lambda: db["classifications"].find_one({"urn": s.urn("people", "ghost")}), 60)
    time.sleep(settings.enforcement.cache_ttl_s + 0.5)
    assert trino.query("analyst", TABLE) == masked
    # Impersonation: the configured gateway may act as the analyst (masks hold), never as the PII user; the analyst
    # may act as nobody. `SET SESSION AUTHORIZATION` is the same check.
    assert trino.query_as("gateway", "analyst", TABLE) == masked
    assert trino.query_as("gateway", "dpo", TABLE) == "PERMISSION_DENIED"
    assert trino.query_as("analyst", "dpo", TABLE) == "PERMISSION_DENIED"
    assert trino.query("analyst", "SET SESSION AUTHORIZATION 'dpo'") == "PERMISSION_DENIED"
    assert trino.query_as("dpo", "dpo", TABLE) == CLEAR
    # The source answers a pass-through query or procedure itself: no mask would apply, so they are refused.
    passthrough = "SELECT * FROM TABLE(warehouse.system.query(query => 'SELECT email FROM public.people'))"
    assert trino.query("analyst", passthrough) == "PERMISSION_DENIED"
    copy = "CALL warehouse.system.execute(query => 'CREATE TABLE public.leak AS SELECT email FROM public.people')"
    assert isinstance(trino.query("analyst", copy), str)  # refused
    assert trino.query("analyst", "CREATE TABLE warehouse.public.leak2 AS SELECT id FROM warehouse.public.people") == (
        "PERMISSION_DENIED"
    )
    assert trino.query("dpo", "SHOW TABLES FROM warehouse.public") == [["people"], ["people_v"]]  # nothing copied
    # Every column is listed (FilterColumns keeps them all).
    columns = trino.query("analyst", "SHOW COLUMNS FROM warehouse.public.people")
    assert isinstance(columns, list) and [c[0] for c in columns] == ["id", "name", "email", "city", "consent"]
    # Another user's query text (literals, PII included) stays theirs; the engine's operators see every query.
    secret = f"secret-{secrets.token_hex(4)}"
    assert trino.query("dpo", f"SELECT '{secret}'") == [[secret]]
    users = 'SELECT DISTINCT "user" FROM system.runtime.queries ORDER BY 1'
    assert trino.query("analyst", users) == [["analyst"]]
    assert ["dpo"] in trino.query("ops", users)
    texts = trino.query("ops", "SELECT query FROM system.runtime.queries")
    assert isinstance(texts, list) and any(secret in r[0] for r in texts)


def test_keys_are_per_engine_and_per_tenant(settings: Settings, setup: Setup) -> None:
    s = setup
    other = f"it-{secrets.token_hex(4)}"
    body = {"name": "other", "catalogs": s.engine["catalogs"], "consent_tag": None}
    theirs = s.api.post(f"/v1/tenants/{other}/engines", json=body, headers=auth_headers(s.api, tenant=other))
    assert theirs.status_code == 201, theirs.text
    # Registration: bad input names its field; listing never shows a key.
    admin = auth_headers(s.api, tenant=s.tenant)
    engines = f"/v1/tenants/{s.tenant}/engines"
    twice = s.api.post(engines, json={**body, "catalogs": s.engine["catalogs"] * 2}, headers=admin)
    assert twice.status_code == 422 and twice.json()["field"] == "catalogs"
    none = s.api.post(engines, json={"name": "x", "catalogs": []}, headers=admin)
    assert none.status_code == 422 and none.json()["field"] == "catalogs"
    listed = s.api.get(engines, headers=admin)
    assert [e["engine_id"] for e in listed.json()["items"]] == [s.engine["engine_id"]]
    assert s.engine["key"].rsplit("_", 1)[1] not in listed.text
    column = {"catalogName": "warehouse", "schemaName": "public", "tableName": "people", "columnType": "varchar"}
    query = {
        "input": {
            "context": {"identity": {"user": "analyst", "groups": []}, "softwareStack": {"trinoVersion": "476"}},
            "action": {"operation": "GetColumnMask", "filterResources": [{"column": {**column, "columnName": "name"}}]},
        }
    }
    base = f"http://127.0.0.1:{API_PORT}/v1/opa"
    with httpx.Client(timeout=10) as http:
        # The same catalog mapped by another tenant's engine: its key reads its own tenant's tags (none).
        publish(settings, [_tag(s.tenant, s.urn("people", "name"), "PII", 20)])  # not auto-classified
        own = f"{base}/{s.engine['key']}/column-masks"
        wait_for("name masked", lambda: http.post(own, json=query).json()["result"] or None, 120, 0.2)
        assert http.post(f"{base}/{theirs.json()['key']}/column-masks", json=query).json() == {"result": []}
        # A wrong key, a malformed one, or a key of a removed engine: 401, and the key is not echoed.
        engine_id = s.engine["engine_id"]
        for key in (f"mle_{engine_id}_wrong-secret", "not-a-key", s.engine["key"][:-1]):
            refused = http.post(f"{base}/{key}/allow", json=query)
            assert refused.status_code == 401 and key not in refused.text
        assert s.api.delete(f"{engines}/{engine_id}", headers=admin).status_code == 204
        time.sleep(settings.enforcement.cache_ttl_s + 0.5)
        assert http.post(f"{base}/{s.engine['key']}/allow", json=query).status_code == 401
    # The customer Trino fails closed: no answer from the policy server, no query.
    assert s.trino.query("analyst", TABLE) != CLEAR
