"""An external OIDC issuer instead of the built-in one: its JWKS is found through its discovery document (served
here by a local HTTP server speaking the OIDC discovery slice), its tokens are accepted, the built-in server's are
not, and an unreachable issuer is a 503, never a 500 or a pass."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fastapi.testclient import TestClient
from joserfc.jwk import RSAKey
from pymongo import MongoClient

from api.app import create_app
from control.auth.settings import IssuerProfile
from ops.settings import Settings
from tests._support.jwt_forge import claims, sign
from tests._support.tokens import api_settings, auth_headers

pytestmark = pytest.mark.integration

Mongo = MongoClient[dict[str, Any]]


class Issuer:
    def __init__(self) -> None:
        self.key = RSAKey.generate_key(2048, parameters={"kid": "ext-1", "alg": "RS256", "use": "sig"}, private=True)
        self.requests: list[str] = []
        self.healthy = True
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.requests.append(self.path)
                if not issuer.healthy:
                    self.send_error(503)
                    return
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": issuer.url, "jwks_uri": f"{issuer.url}/keys", "response_types_supported": []}
                elif self.path == "/keys":
                    body = {"keys": [issuer.key.as_dict(private=False)]}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def token(self, typ: str | None = "at+jwt", **overrides: Any) -> str:
        body = claims(iss=self.url, aud="metalake-api", sub="svc-1", client_id="svc-1", **overrides)
        header = {"alg": "RS256", "kid": "ext-1"} | ({"typ": typ} if typ else {})
        return sign(self.key, header, body)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    it = Issuer()
    yield it
    it.close()


def test_external_issuer_tokens(settings: Settings, mongo: Mongo, issuer: Issuer, tenant: str) -> None:
    own = api_settings(settings, external_issuer=issuer.url, tenant_claim="org", jwks_min_refresh_s=0.0)
    with TestClient(create_app(own, mongo=mongo)) as client:
        url = f"/v1/tenants/{tenant}/clients"
        token = issuer.token(org=tenant, scope="tenant:admin", tenant=None)
        response = client.get(url, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200, response.text
        assert issuer.requests[:2] == ["/.well-known/openid-configuration", "/keys"]
        # Without a profile for the issuer, RFC 9068 holds: scopes in an scp array are not read (403), typ JWT or none
        # is not an access token (401).
        scp = issuer.token(org=tenant, scope=None, scp=["tenant:admin"], tenant=None)
        assert client.get(url, headers={"Authorization": f"Bearer {scp}"}).status_code == 403
        for typ in ("JWT", None):
            okta = issuer.token(typ=typ, org=tenant, scope=None, scp=["tenant:admin"], tenant=None)
            assert client.get(url, headers={"Authorization": f"Bearer {okta}"}).status_code == 401
        other = issuer.token(org=f"{tenant}-b", scope="tenant:admin", tenant=None)
        assert client.get(url, headers={"Authorization": f"Bearer {other}"}).status_code == 404
        # The built-in authorization server is off: its token endpoint says where tokens come from.
        refused = client.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=("a", "b"))
        assert refused.status_code == 400 and refused.json()["issuer"] == issuer.url
        # A token from the built-in issuer (another app, same control plane) is not trusted here.
        with TestClient(create_app(api_settings(settings), mongo=mongo)) as builtin:
            headers = auth_headers(builtin, tenant=tenant, role="admin")
        response = client.get(url, headers=headers)
        assert response.status_code == 401


def test_unreachable_external_issuer_is_503(settings: Settings, mongo: Mongo, issuer: Issuer, tenant: str) -> None:
    issuer.healthy = False
    own = api_settings(settings, external_issuer=issuer.url, jwks_min_refresh_s=0.0)
    with TestClient(create_app(own, mongo=mongo)) as client:
        token = issuer.token(tenant=tenant, scope="tenant:admin")
        response = client.get(f"/v1/tenants/{tenant}/clients", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 503 and response.headers["content-type"] == "application/problem+json"
        # Once the issuer is back, the same token passes.
        issuer.healthy = True
        time.sleep(0.01)
        response = client.get(f"/v1/tenants/{tenant}/clients", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200, response.text


def test_an_issuer_profile_admits_okta_style_tokens(
    settings: Settings, mongo: Mongo, issuer: Issuer, tenant: str
) -> None:
    profile = IssuerProfile(
        token_types=["at+jwt", "JWT"], allow_missing_typ=True, scope_claim="scp", scope_format="list"
    )
    own = api_settings(settings, external_issuer=issuer.url, issuer_profiles={issuer.url: profile}, tenant_claim="org")
    with TestClient(create_app(own, mongo=mongo)) as client:
        url = f"/v1/tenants/{tenant}/clients"
        for typ in ("JWT", None, "at+jwt"):
            token = issuer.token(typ=typ, org=tenant, scope=None, scp=["tenant:admin"], tenant=None)
            response = client.get(url, headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 200, (typ, response.text)
        # The profile names what it accepts, nothing more: another typ, or a scope string where it expects the array.
        odd = issuer.token(typ="JOSE", org=tenant, scope=None, scp=["tenant:admin"], tenant=None)
        assert client.get(url, headers={"Authorization": f"Bearer {odd}"}).status_code == 401
        flat = issuer.token(typ="JWT", org=tenant, scope=None, scp="tenant:admin", tenant=None)
        assert client.get(url, headers={"Authorization": f"Bearer {flat}"}).status_code == 401
