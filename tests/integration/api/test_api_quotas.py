"""Per-tenant caps on the real control plane (issue 21, item 16): the API counts a tenant's live objects in MongoDB
(FerretDB) and refuses one more with 409 quota-exceeded; revoked objects stop counting, other tenants are apart."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from pymongo import MongoClient

from api.app import create_app
from control.auth.settings import TenantQuotas
from ops.settings import Settings
from tests._support.tokens import api_settings, auth_headers


def test_write_keys_and_clients_stop_at_the_tenants_cap(
    settings: Settings, control: MongoClient[dict[str, Any]], tenant: str
) -> None:
    capped = api_settings(settings, quotas=TenantQuotas(clients=2, write_keys=2))
    with TestClient(create_app(capped, mongo=control)) as client:
        admin = auth_headers(client, tenant=tenant, role="admin")  # the tenant's first client
        keys = f"/v1/tenants/{tenant}/write-keys"
        made = [client.post(keys, headers=admin) for _ in range(2)]
        assert [r.status_code for r in made] == [201, 201]
        refused = client.post(keys, headers=admin)
        assert refused.status_code == 409, refused.text
        assert refused.json()["type"] == "/problems/quota-exceeded"
        assert refused.json()["kind"] == "write_keys" and refused.json()["cap"] == 2
        assert client.delete(f"{keys}/{made[0].json()['key_id']}", headers=admin).status_code == 204
        assert client.post(keys, headers=admin).status_code == 201

        clients = f"/v1/tenants/{tenant}/clients"
        body = {"name": "dashboards", "role": "read-only"}
        assert client.post(clients, json=body, headers=admin).status_code == 201
        over = client.post(clients, json=body, headers=admin)
        assert over.status_code == 409 and over.json()["kind"] == "clients"

        other = f"{tenant}-b"
        other_admin = auth_headers(client, tenant=other, role="admin")
        assert client.post(f"/v1/tenants/{other}/write-keys", headers=other_admin).status_code == 201
