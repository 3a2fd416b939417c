"""Per-tenant caps on the objects a tenant creates (409 quota-exceeded naming the kind and the cap), and a per-tenant
rate budget beside each client's: a tenant does not multiply its rate by creating clients."""

from __future__ import annotations

import asyncio
import secrets
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr

from api import quotas
from api.context import ApiContext
from api.deps import TenantReader, connector_store
from control.auth.settings import ApiSettings, TenantQuotas
from control.connectors.records import WriteKeyInfo
from ops.settings import Settings
from tests._support.api_app import bearer, build_app


def _matches(doc: dict[str, Any], query: dict[str, Any]) -> bool:
    for field, want in query.items():
        if isinstance(want, dict) and "$exists" in want:
            if (field in doc) != want["$exists"]:
                return False
        elif isinstance(want, dict) and "$ne" in want:
            if doc.get(field) == want["$ne"]:
                return False
        elif doc.get(field) != want:
            return False
    return True


class _Collection:
    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = docs

    def count_documents(self, query: dict[str, Any], limit: int = 0) -> int:
        found = sum(1 for d in self.docs if _matches(d, query))
        return min(found, limit) if limit else found

    def find_one(self, query: dict[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        return next((d for d in self.docs if _matches(d, query)), None)


class _Mongo:
    """The control plane's collections as lists of documents: what a count sees is what the store wrote."""

    def __init__(self) -> None:
        self.collections: dict[str, list[dict[str, Any]]] = {}

    def __getitem__(self, database: str) -> Any:
        outer = self

        class _Database:
            def __getitem__(self, name: str) -> _Collection:
                return _Collection(outer.collections.setdefault(name, []))

        return _Database()


class _WriteKeys:
    def __init__(self, mongo: _Mongo) -> None:
        self.docs = mongo.collections.setdefault("connector_secrets", [])

    def create(self, tenant: str, *, pii: bool = False) -> tuple[WriteKeyInfo, SecretStr]:
        info = WriteKeyInfo(key_id=secrets.token_hex(8), created_at=datetime.now(UTC), pii=pii)
        self.docs.append({"tenant": tenant, "key_id": info.key_id})
        return info, SecretStr(f"mlk_{info.key_id}_x")


@pytest.fixture
def audited(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    rows: list[Any] = []
    monkeypatch.setattr("control.audit.append", lambda path, batch, storage=None: rows.extend(batch))
    return rows


def _run(app: FastAPI, scenario: Any) -> None:
    async def body() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            await scenario(client)

    asyncio.run(body())


def test_a_tenant_at_its_cap_of_write_keys_gets_409_naming_the_kind_and_the_cap(audited: list[Any]) -> None:
    settings = Settings(api=ApiSettings(quotas=TenantQuotas(write_keys=2)))
    app, _ = build_app(settings)
    mongo = _Mongo()
    app.state.ctx = ApiContext(settings=settings, mongo=mongo)  # type: ignore[arg-type]
    keys = _WriteKeys(mongo)
    store = SimpleNamespace(write_keys=keys)
    app.dependency_overrides[connector_store] = lambda: store

    async def scenario(client: httpx.AsyncClient) -> None:
        url = "/v1/tenants/acme/write-keys"
        assert [(await client.post(url, headers=bearer("acme"))).status_code for _ in range(2)] == [201, 201]
        refused = await client.post(url, headers=bearer("acme"))
        assert refused.status_code == 409 and refused.headers["content-type"] == "application/problem+json"
        problem = refused.json()
        assert problem["type"] == "/problems/quota-exceeded"
        assert problem["kind"] == "write_keys" and problem["cap"] == 2 and "2 write keys" in problem["detail"]
        assert len(keys.docs) == 2  # nothing was written
        # Another tenant has its own cap; a revoked key no longer counts.
        assert (await client.post("/v1/tenants/globex/write-keys", headers=bearer("globex"))).status_code == 201
        keys.docs[0]["revoked"] = True
        assert (await client.post(url, headers=bearer("acme"))).status_code == 201

    _run(app, scenario)


def test_every_kind_is_capped_by_its_setting() -> None:
    settings = Settings()
    mongo = _Mongo()
    ctx = ApiContext(settings=settings, mongo=mongo)  # type: ignore[arg-type]
    for kind, spec in quotas.KINDS.items():
        cap = spec.cap(settings)
        docs = mongo.collections.setdefault(spec.collection, [])
        docs.extend({"tenant": "acme", "state": "active", "key_id": str(i)} for i in range(cap - 1))
        with quotas.claim(ctx, "acme", kind):
            docs.append({"tenant": "acme", "state": "active", "key_id": "last"})
        with pytest.raises(Exception) as refused, quotas.claim(ctx, "acme", kind):
            pass
        assert getattr(refused.value, "status", None) == 409, kind
        assert refused.value.body()["kind"] == kind and refused.value.body()["cap"] == cap  # type: ignore[attr-defined]
    assert quotas.KINDS[quotas.ENGINES].cap(settings) == settings.enforcement.max_engines_per_tenant


def test_a_tenant_does_not_multiply_its_rate_by_creating_clients() -> None:
    api = ApiSettings(
        rate_limit_per_s=0.001, rate_limit_burst=5, tenant_rate_limit_per_s=0.001, tenant_rate_limit_burst=8
    )
    app, _ = build_app(Settings(api=api))

    @app.get("/v1/tenants/{tenant}/cheap")
    def cheap(tc: TenantReader) -> dict[str, str]:
        return {"tenant": tc.tenant}

    async def scenario(client: httpx.AsyncClient) -> None:
        async def codes(tenant: str, who: str, n: int) -> list[int]:
            url = f"/v1/tenants/{tenant}/cheap"
            return [(await client.get(url, headers=bearer(tenant, who))).status_code for _ in range(n)]

        assert await codes("acme", "c1", 6) == [200] * 5 + [429]  # the client's own budget
        # A second client of the tenant has its own bucket, but only what is left of the tenant's.
        assert await codes("acme", "c2", 4) == [200] * 3 + [429]
        limited = await client.get("/v1/tenants/acme/cheap", headers=bearer("acme", "c3"))
        assert limited.status_code == 429 and "tenant" in limited.json()["detail"]
        assert "Retry-After" in limited.headers
        assert await codes("globex", "g1", 5) == [200] * 5  # another tenant is untouched

    _run(app, scenario)
