"""The one rule that admits an access token, for the admin API and the ingest API alike: valid, its client not
revoked (built-in issuer only), its tenant not suspended."""

from __future__ import annotations

from pathlib import Path

import pytest
from pymongo import MongoClient

from control.auth.clients import ClientCache
from control.auth.gate import TenantRefused, build_gate
from control.auth.validator import InvalidToken
from metalake.lake_settings import LakeSettings
from metalake.mongo import Doc
from ops.settings import Settings
from tests._support.runtime_fakes import FakeClients, FakeTenants, access_token, fake_gate


def test_a_valid_token_of_an_active_client_and_tenant_is_admitted() -> None:
    verified = fake_gate(FakeClients(), FakeTenants()).admit(access_token(scope="events:write"))
    assert verified.principal.tenant == "acme" and verified.client_id == "mlc_test"
    assert verified.principal.scopes == frozenset({"events:write"})


def test_a_revoked_client_is_refused_as_an_invalid_token() -> None:
    clients = FakeClients()
    clients.revoked.add("mlc_test")
    with pytest.raises(InvalidToken, match="the client was revoked"):
        fake_gate(clients, FakeTenants()).admit(access_token())


def test_a_suspended_tenant_is_refused_but_a_platform_token_without_a_tenant_is_not() -> None:
    tenants = FakeTenants()
    tenants.suspend("acme")
    gate = fake_gate(FakeClients(), tenants)
    with pytest.raises(TenantRefused):
        gate.admit(access_token())
    assert gate.admit(access_token(tenant=None, scope="platform:admin")).principal.tenant is None


def test_an_external_issuer_has_no_client_check_and_the_built_in_one_has() -> None:
    # Nothing here reaches MongoDB: the stores read lazily, at the first token.
    client: MongoClient[Doc] = MongoClient("mongodb://127.0.0.1:9", connect=False)
    try:
        control = client["metalake_control"]
        # A lake root of its own: a checkout's stack.env (read by load_settings, not by Settings()) holds none here.
        ours = Settings(lake=LakeSettings(root=Path("/nonexistent/lake")))
        assert isinstance(build_gate(ours, control).clients, ClientCache)
        external = ours.model_copy(deep=True)
        external.api.external_issuer = "https://login.example.com"
        assert build_gate(external, control).clients is None
    finally:
        client.close()
