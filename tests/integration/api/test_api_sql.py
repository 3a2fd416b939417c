"""The SQL endpoint and share links on the real stack (Trino, FerretDB), with real access tokens.

Two fresh tenants each get a data table; their rules come from ``AccessSync`` (what ``metalake access sync`` runs).
The masked column's classification is upserted into MongoDB the way the projection writes it (the event path through
the job is covered by test_trino_access.py).
"""

from __future__ import annotations

import csv
import hashlib
import io
import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient

from api.app import create_app
from api.services.audit import target_hash, tenant_audit_path
from control.audit import AuditQuery, read
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.access.sync import AccessSync
from tenants.lake_catalog import register_tenant
from tenants.naming import ADMIN_ONLY_TABLES, POOLED_TABLES, TRINO_POOLED_SCHEMA, names_for, trino_user
from tenants.trino_schemas import trino_schema
from tests._support.accessit import EMAILS, drop_schema, make_data_table, query_as
from tests._support.itest import wait_for
from tests._support.tokens import api_settings, auth_headers, create_api_client, request_token
from tests._support.trinoschema import schema_of

pytestmark = pytest.mark.integration

MASK = "****"


@pytest.fixture
def tenants(
    settings: Settings, stack: StackManager, tenant: str, trino_cursor: Any, mongo: MongoClient[dict[str, Any]]
) -> tuple[str, str]:
    other = f"it-{secrets.token_hex(4)}"
    for t in (tenant, other):
        make_data_table(settings, trino_cursor, names_for(t, settings.lake_root), "people")
    schema = trino_schema(settings, tenant)
    urn = f"urn:metalake:trino:{settings.access.trino_instance}/lake/{schema}/people/email"
    mongo[names_for(tenant, settings.lake_root).mongo_database]["classifications"].update_one(
        {"_id": f"{urn}|PII"},
        {"$set": {"urn": urn, "tag": "PII", "source": "human", "deleted": False, "version": 1, "event_id": "e1"}},
        upsert=True,
    )
    AccessSync(settings, mongo).sync([tenant, other])
    probe = f'SELECT email FROM lake."{schema}".people'
    wait_for("Trino to reload the rules", lambda: query_as(settings, trino_user(tenant), probe) == [[MASK], [MASK]], 30)
    return tenant, other


@pytest.fixture
def client(settings: Settings, mongo: MongoClient[dict[str, Any]]) -> Iterator[TestClient]:
    app_settings = api_settings(settings)
    app_settings.sql.max_rows = 50
    with TestClient(create_app(app_settings, mongo=mongo)) as c:
        yield c


def _sql(client: TestClient, tenant: str, headers: dict[str, str], sql: str, **body: Any) -> Any:
    return client.post(f"/v1/tenants/{tenant}/sql", json={"sql": sql, **body}, headers=headers)


def test_sql_runs_as_the_tenant_only_in_its_schema(
    settings: Settings, client: TestClient, tenants: tuple[str, str]
) -> None:
    a, b = tenants
    headers = auth_headers(client, tenant=a, role="read-only")
    schema_a = trino_schema(settings, a)
    schema_b = trino_schema(settings, b)

    ok = _sql(client, a, headers, "SELECT id, email, phone FROM people ORDER BY id")
    assert ok.status_code == 200, ok.text
    assert ok.headers["content-type"].startswith("application/json")
    assert ok.json() == {
        "columns": [
            {"name": "id", "type": "bigint"},
            {"name": "email", "type": "varchar"},
            {"name": "phone", "type": "varchar"},
        ],
        "rows": [[1, MASK, "phone-1"], [2, MASK, "phone-2"]],
        "row_count": 2,
        "truncated": False,
        "reason": None,
    }

    as_csv = _sql(client, a, {**headers, "Accept": "text/csv"}, "SELECT id, email FROM people ORDER BY id")
    assert as_csv.status_code == 200 and as_csv.headers["content-type"].startswith("text/csv")
    assert list(csv.reader(io.StringIO(as_csv.text))) == [["id", "email"], ["1", MASK], ["2", MASK]]

    # Another tenant's table, by full name: refused with the same answer a missing table gets.
    denied = _sql(client, a, headers, f'SELECT * FROM lake."{schema_b}".people')
    missing = _sql(client, a, headers, 'SELECT * FROM lake."it_nosuch00".people')
    for response in (denied, missing):
        assert response.status_code == 400
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["type"] == "/problems/sql-not-accessible"
    assert denied.json()["detail"] == missing.json()["detail"]
    assert b not in denied.text and schema_b not in denied.text
    listed = _sql(client, a, headers, "SELECT schema_name FROM lake.information_schema.schemata").json()
    assert {r[0] for r in listed["rows"]} == {schema_a}

    # B's path with A's token: 404, as if B did not exist. A syntax error: 400 with Trino's message.
    assert _sql(client, b, headers, "SELECT 1").status_code == 404
    bad = _sql(client, a, headers, "SELEC 1")
    assert bad.status_code == 400 and bad.json()["type"] == "/problems/sql-error"
    assert "mismatched input 'SELEC'" in bad.json()["detail"]
    # Writes are Trino's to refuse: the tenant's identity has SELECT only.
    assert _sql(client, a, headers, "INSERT INTO people (id) VALUES (9)").status_code == 400
    # No token, or a token without sql:read.
    assert client.post(f"/v1/tenants/{a}/sql", json={"sql": "SELECT 1"}).status_code == 401
    no_sql = auth_headers(client, tenant=a, role="read-only", scope="tenant:read")
    assert _sql(client, a, no_sql, "SELECT 1").status_code == 403


def test_the_pii_scope_reads_pii_in_clear(client: TestClient, tenants: tuple[str, str]) -> None:
    a, _ = tenants
    admin = auth_headers(client, tenant=a, role="admin")
    body = {"name": "dpo", "role": "read-only", "pii": True}
    made = client.post(f"/v1/tenants/{a}/clients", json=body, headers=admin)
    assert made.status_code == 201, made.text
    assert "pii:read" in made.json()["scopes"]
    token = request_token(client, made.json()["client_id"], made.json()["client_secret"])
    pii_reader = {"Authorization": f"Bearer {token['access_token']}"}
    clear = _sql(client, a, pii_reader, "SELECT email FROM people ORDER BY id")
    assert clear.status_code == 200, clear.text
    assert clear.json()["rows"] == [[EMAILS[0]], [EMAILS[1]]]
    # A role alone never grants it: the same query as a plain read-only client stays masked.
    masked = _sql(client, a, auth_headers(client, tenant=a, role="read-only"), "SELECT email FROM people ORDER BY id")
    assert masked.json()["rows"] != clear.json()["rows"]


def test_row_and_time_limits(client: TestClient, tenants: tuple[str, str], trino_cursor: Any) -> None:
    a, _ = tenants
    headers = auth_headers(client, tenant=a, role="read-only")
    many = "SELECT x FROM UNNEST(sequence(1, 1000)) AS t(x) ORDER BY x"
    capped = _sql(client, a, headers, many).json()  # settings.sql.max_rows = 50
    assert (capped["row_count"], capped["truncated"], capped["reason"]) == (50, True, "row_limit")
    assert [r[0] for r in capped["rows"]] == list(range(1, 51))
    fewer = _sql(client, a, headers, many, max_rows=7, format="csv")
    assert fewer.text.split("\r\n")[:-1] == ["x", *[str(i) for i in range(1, 8)]]

    # A result far past the limit: the query is cancelled in Trino, not read to its end.
    big = f"SELECT x, y FROM UNNEST(sequence(1, 10000)) a(x) CROSS JOIN UNNEST(sequence(1, 1000)) b(y) -- {a}"
    assert _sql(client, a, headers, big).json()["reason"] == "row_limit"

    def cancelled() -> bool:
        trino_cursor.execute("SELECT state, error_code FROM system.runtime.queries WHERE query = ?", [big])
        return trino_cursor.fetchall() == [["FAILED", "USER_CANCELED"]]

    wait_for("Trino to report the query cancelled", cancelled, timeout_s=30)

    client.app.state.ctx.settings.sql.timeout_s = 2  # type: ignore[attr-defined]
    slow = (
        "SELECT count(*) FROM UNNEST(sequence(1, 10000)) a(x) CROSS JOIN UNNEST(sequence(1, 10000)) b(y) "
        "CROSS JOIN UNNEST(sequence(1, 10000)) c(z)"
    )
    started = time.monotonic()
    response = _sql(client, a, headers, slow)
    assert time.monotonic() - started < 30
    assert response.status_code == 422 and response.json()["type"] == "/problems/sql-time-limit"


def test_share_link_works_without_a_token_then_expires(client: TestClient, tenants: tuple[str, str]) -> None:
    a, _ = tenants
    headers = auth_headers(client, tenant=a, role="read-only")
    created = client.post(
        f"/v1/tenants/{a}/shares",
        json={"sql": "SELECT id, email FROM people ORDER BY id", "expires_in_s": 4},
        headers=headers,
    )
    assert created.status_code == 201, created.text
    link = created.json()
    token = link["id"]
    assert link["csv_url"] == f"/share/{token}/data.csv" and len(token) >= 40
    # Only the hash is stored.
    stored = client.app.state.ctx.mongo["metalake_control"]["shares"]  # type: ignore[attr-defined]
    assert stored.find_one({"_id": token}) is None and stored.count_documents({"tenant": a}) == 1

    as_csv = client.get(link["csv_url"])
    assert as_csv.status_code == 200, as_csv.text
    assert list(csv.reader(io.StringIO(as_csv.text))) == [["id", "email"], ["1", MASK], ["2", MASK]]
    as_json = client.get(link["json_url"])
    assert as_json.status_code == 200 and as_json.json()["rows"] == [[1, MASK], [2, MASK]]
    assert client.get(f"/share/{token[:-2]}xx/data.csv").status_code == 404

    expires_at = datetime.fromisoformat(link["expires_at"].replace("Z", "+00:00"))
    wait_for("the link to expire", lambda: datetime.now(UTC) > expires_at, timeout_s=30)
    gone = client.get(link["csv_url"])
    assert gone.status_code == 410 and gone.json()["type"] == "/problems/share-expired"
    # Making a new link prunes the expired ones (no TTL indexes): the old id is then unknown.
    again = client.post(f"/v1/tenants/{a}/shares", json={"sql": "SELECT 1"}, headers=headers)
    assert again.status_code == 201
    assert client.get(link["json_url"]).status_code == 404
    assert client.get(again.json()["json_url"]).json()["rows"] == [[1]]

    # Bad SQL and other tenants' tables are refused when the link is made, not when it is read.
    bad = client.post(f"/v1/tenants/{a}/shares", json={"sql": "SELEC 1"}, headers=headers)
    assert bad.status_code == 400
    too_long = client.post(f"/v1/tenants/{a}/shares", json={"sql": "SELECT 1", "expires_in_s": 10**9}, headers=headers)
    assert too_long.status_code == 422 and too_long.json()["field"] == "expires_in_s"


def test_csv_answers_and_share_links_never_hand_a_spreadsheet_a_formula(
    client: TestClient, tenants: tuple[str, str]
) -> None:
    a, _ = tenants
    headers = auth_headers(client, tenant=a, role="read-only")
    sql = """SELECT '=HYPERLINK("http://x.example")' AS "=cmd", '@A1' AS at, '+1' AS plus, -3 AS n, 'ok' AS ok"""
    expected = [["'=cmd", "at", "plus", "n", "ok"], ['\'=HYPERLINK("http://x.example")', "'@A1", "'+1", "-3", "ok"]]
    answer = _sql(client, a, headers, sql, format="csv")
    assert answer.status_code == 200, answer.text
    assert list(csv.reader(io.StringIO(answer.text))) == expected
    link = _share(client, a, headers, sql)
    shared = client.get(link["csv_url"])
    assert shared.status_code == 200 and list(csv.reader(io.StringIO(shared.text))) == expected
    # The JSON form is for programs: the values as they are.
    assert client.get(link["json_url"]).json()["rows"] == [['=HYPERLINK("http://x.example")', "@A1", "+1", -3, "ok"]]


def test_a_pooled_tenant_queries_its_views_never_the_shared_tables(
    settings: Settings, client: TestClient, tenants: tuple[str, str], trino_cursor: Any
) -> None:
    """Provisioning gives a pooled tenant views over the shared tables in its schema: the endpoint reads them by
    their short names; the shared tables and their metadata tables get the answer a missing table gets."""
    a, _ = tenants
    names = names_for(a, settings.lake_root)
    register_tenant(settings, names)
    headers = auth_headers(client, tenant=a, role="read-only")
    try:
        for table in POOLED_TABLES:
            if table in ADMIN_ONLY_TABLES:
                continue  # test_audit_and_dead_letters_are_for_tenant_admins_on_every_path
            counted = _sql(client, a, headers, f'SELECT count(*) FROM "{table}" WHERE false')
            assert counted.status_code == 200, (table, counted.text)
            assert counted.json()["rows"] == [[0]]
        missing = _sql(client, a, headers, 'SELECT * FROM lake."it_nosuch00".assets').json()["detail"]
        for hidden in ("assets", "assets$history", "assets$partitions", "events$properties"):
            denied = _sql(client, a, headers, f'SELECT * FROM lake."{TRINO_POOLED_SCHEMA}"."{hidden}"')
            assert denied.status_code == 400 and denied.json()["type"] == "/problems/sql-not-accessible", hidden
            assert denied.json()["detail"] == missing
        listed = _sql(client, a, headers, "SELECT schema_name FROM lake.information_schema.schemata").json()
        assert {r[0] for r in listed["rows"]} == {schema_of(names)}
    finally:
        drop_schema(settings, trino_cursor, names)


def test_audit_and_dead_letters_are_for_tenant_admins_on_every_path(
    settings: Settings, client: TestClient, tenants: tuple[str, str], trino_cursor: Any
) -> None:
    """The API keeps the dead letters (raw payloads) to tenant:admin: so do the SQL endpoint, share links (which never
    run as an admin) and Trino itself for the tenant's ordinary users."""
    a, _ = tenants
    names = names_for(a, settings.lake_root)
    register_tenant(settings, names)
    sql = 'SELECT count(*) FROM "_dlq" WHERE false'
    try:
        missing = _sql(client, a, auth_headers(client, tenant=a, role="read-only"), "SELECT * FROM it_nosuch00")
        for role in ("read-only", "read-write"):
            denied = _sql(client, a, auth_headers(client, tenant=a, role=role), sql)
            assert denied.status_code == 400, (role, denied.text)
            assert (denied.json()["type"], denied.json()["detail"]) == (
                missing.json()["type"],
                missing.json()["detail"],
            )
        admin = auth_headers(client, tenant=a, role="admin")
        allowed = _sql(client, a, admin, sql)
        assert allowed.status_code == 200 and allowed.json()["rows"] == [[0]], allowed.text
        # A share link runs as the tenant's ordinary user whoever made it: an admin cannot publish the dead letters.
        shared = client.post(f"/v1/tenants/{a}/shares", json={"sql": sql}, headers=admin)
        assert shared.status_code == 400 and shared.json()["type"] == "/problems/sql-not-accessible", shared.text
        # In Trino itself (the users a tenant's tokens name): the ordinary users are denied, the admin users read.
        direct = sql.replace('"_dlq"', f'lake."{schema_of(names)}"."_dlq"')
        for user in (trino_user(a), trino_user(a, pii=True)):
            assert query_as(settings, user, direct) == "PERMISSION_DENIED", user
        for user in (trino_user(a, admin=True), trino_user(a, pii=True, admin=True)):
            assert query_as(settings, user, direct) == [[0]], user
        listed = _sql(client, a, auth_headers(client, tenant=a, role="read-only"), "SHOW TABLES").json()["rows"]
        assert ["_dlq"] not in listed and ["assets"] in listed
    finally:
        drop_schema(settings, trino_cursor, names)


def _client(client: TestClient, tenant: str, role: str) -> tuple[str, dict[str, str]]:
    record, secret = create_api_client(client, tenant=tenant, role=role)
    token = request_token(client, record.client_id, secret)["access_token"]
    return record.client_id, {"Authorization": f"Bearer {token}"}


def _share(client: TestClient, tenant: str, headers: dict[str, str], sql: str = "SELECT id FROM people") -> Any:
    created = client.post(f"/v1/tenants/{tenant}/shares", json={"sql": sql}, headers=headers)
    assert created.status_code == 201, created.text
    return created.json()


def test_share_links_are_listed_and_revoked_by_the_tenant_admin_and_die_with_their_creator(
    client: TestClient, tenants: tuple[str, str]
) -> None:
    a, b = tenants
    admin_id, admin = _client(client, a, "admin")
    reader = auth_headers(client, tenant=a, role="read-only")
    maker_id, maker_headers = _client(client, a, "read-only")
    kept, revoked, orphaned = _share(client, a, admin), _share(client, a, admin), _share(client, a, maker_headers)
    for link in (kept, revoked, orphaned):
        assert client.get(link["json_url"]).status_code == 200
        assert link["ref"] == hashlib.sha256(link["id"].encode()).hexdigest()

    # tenant:admin sees every link with its SQL; tenant:read the same without the SQL; neither sees a link's id.
    listed = client.get(f"/v1/tenants/{a}/shares", headers=admin)
    assert listed.status_code == 200, listed.text
    items = {item["ref"]: item for item in listed.json()["items"]}
    assert set(items) == {kept["ref"], revoked["ref"], orphaned["ref"]}
    assert items[orphaned["ref"]]["created_by"] == maker_id
    assert {i["state"] for i in items.values()} == {"active"} and items[kept["ref"]]["sql"] == "SELECT id FROM people"
    as_reader = client.get(f"/v1/tenants/{a}/shares", headers=reader).json()["items"]
    assert {i["ref"] for i in as_reader} == set(items) and all(i["sql"] is None for i in as_reader)
    assert not any(link["id"] in listed.text for link in (kept, revoked, orphaned))
    # Paging: one per page, resumable with the cursor.
    first = client.get(f"/v1/tenants/{a}/shares", params={"limit": 1}, headers=admin).json()
    second = client.get(
        f"/v1/tenants/{a}/shares", params={"limit": 1, "cursor": first["next_cursor"]}, headers=admin
    ).json()
    assert first["items"][0]["ref"] < second["items"][0]["ref"]
    # Another tenant's admin neither lists nor revokes A's links.
    b_admin = auth_headers(client, tenant=b, role="admin")
    assert client.get(f"/v1/tenants/{b}/shares", headers=b_admin).json()["items"] == []
    assert client.delete(f"/v1/tenants/{b}/shares/{kept['ref']}", headers=b_admin).status_code == 404
    assert client.delete(f"/v1/tenants/{a}/shares/{kept['ref']}", headers=b_admin).status_code in (403, 404)

    # Revoking needs tenant:admin; the link stops at once, stays listed as revoked; audited.
    assert client.delete(f"/v1/tenants/{a}/shares/{revoked['ref']}", headers=reader).status_code == 403
    assert client.delete(f"/v1/tenants/{a}/shares/{revoked['ref']}", headers=maker_headers).status_code == 403
    done = client.delete(f"/v1/tenants/{a}/shares/{revoked['ref']}", headers=admin)
    assert done.status_code == 200 and done.json()["state"] == "revoked" and done.json()["revoked_at"]
    gone = client.get(revoked["csv_url"])
    assert gone.status_code == 410 and gone.json()["type"] == "/problems/share-revoked"
    assert client.delete(f"/v1/tenants/{a}/shares/{'0' * 64}", headers=admin).status_code == 404
    assert client.delete(f"/v1/tenants/{a}/shares/not-a-ref", headers=admin).status_code == 422

    # Revoking the API client that made a link ends the link (checked at read time).
    assert client.delete(f"/v1/tenants/{a}/clients/{maker_id}", headers=admin).status_code == 200
    dead = client.get(orphaned["json_url"])
    assert dead.status_code == 410 and dead.json()["type"] == "/problems/share-revoked"
    states = {i["ref"]: i["state"] for i in client.get(f"/v1/tenants/{a}/shares", headers=admin).json()["items"]}
    assert states == {kept["ref"]: "active", revoked["ref"]: "revoked", orphaned["ref"]: "creator-revoked"}
    assert client.get(kept["json_url"]).status_code == 200

    audited = read(tenant_audit_path(client.app.state.ctx, a), AuditQuery(action="share.revoke", limit=10))  # type: ignore[attr-defined]
    assert [(r.actor, r.target_hash) for r in audited] == [(admin_id, target_hash(revoked["ref"]))]


def test_a_tenant_at_its_query_cap_gets_429_while_another_tenant_queries(
    client: TestClient, tenants: tuple[str, str]
) -> None:
    """The cap is the Trino pool's (api/services/trinopool.py): a slot held as a running query would hold it."""
    a, b = tenants
    headers_a, headers_b = (
        auth_headers(client, tenant=a, role="read-only"),
        auth_headers(client, tenant=b, role="admin"),
    )
    link = _share(client, a, headers_a)
    pool = client.app.state.ctx.trino  # type: ignore[attr-defined]
    held = [pool.admit(a) for _ in range(client.app.state.ctx.settings.sql.max_concurrent_per_tenant)]  # type: ignore[attr-defined]
    try:
        for refused in (_sql(client, a, headers_a, "SELECT 1"), client.get(link["json_url"])):
            assert refused.status_code == 429, refused.text
            assert refused.json()["type"] == "/problems/sql-concurrency-limit"
            assert refused.headers["Retry-After"] == "1"
        other = _sql(client, b, headers_b, "SELECT count(*) FROM people")
        assert other.status_code == 200 and other.json()["rows"] == [[2]]
    finally:
        for slot in held:
            slot.finish()
    assert _sql(client, a, headers_a, "SELECT 1").status_code == 200
    # A slot is freed after its connection's clean-up, which runs on the pool once the body is sent (Slot.finish
    # never blocks): a moment after the response, not before it.
    wait_for("the slots freed", lambda: pool.active(a) == 0 and pool.active(b) == 0, timeout_s=10)


def test_share_reads_are_rate_limited_per_link_and_per_peer(
    settings: Settings, mongo: MongoClient[dict[str, Any]], tenants: tuple[str, str]
) -> None:
    a, _ = tenants
    limited = api_settings(settings)
    # Slow refills: the buckets do not fill again during the test.
    limited.sql.share_rate_per_s, limited.sql.share_burst = 0.01, 2
    limited.sql.share_peer_rate_per_s, limited.sql.share_peer_burst = 0.01, 6
    with TestClient(create_app(limited, mongo=mongo)) as c:
        headers = auth_headers(c, tenant=a, role="read-only")
        first, second, third = (_share(c, a, headers, "SELECT 1") for _ in range(3))
        assert [c.get(first["json_url"]).status_code for _ in range(3)] == [200, 200, 429]
        over = c.get(first["json_url"])
        assert over.json()["type"] == "/problems/rate-limited" and int(over.headers["Retry-After"]) >= 1
        # Another link has its own bucket, until the peer's (4 reads so far) runs out.
        assert [c.get(second["json_url"]).status_code for _ in range(2)] == [200, 200]
        assert c.get(third["json_url"]).status_code == 429
        # Guessing ids costs the peer too, before any lookup.
        assert c.get(f"/share/{'x' * 43}/data.json").status_code == 429
