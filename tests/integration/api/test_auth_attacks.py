"""The JWT attack matrix against the running app: tokens signed with the server's real key (or forged around it) are
refused with 401 ``invalid_token`` problem+json; a rotated key keeps its tokens valid until it is retired.

Each test uses its own key encryption key, so its signing keys (and their rotation) never touch the keys other test
processes sign with in the shared control plane."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from fastapi.testclient import TestClient
from joserfc.jwk import RSAKey
from pydantic import SecretStr
from pymongo import MongoClient

from api.app import create_app
from api.auth.keys import KeyEncryption
from ops.settings import Settings
from tenants.naming import CONTROL_DATABASE
from tests._support.jwt_forge import claims, hs256_with_public_key, sign, unsigned
from tests._support.tokens import api_settings, auth_headers, create_api_client, request_token

pytestmark = pytest.mark.integration

Mongo = MongoClient[dict[str, Any]]
ISSUER, AUDIENCE = "http://127.0.0.1:8000", "metalake-api"


@pytest.fixture
def client(settings: Settings, mongo: Mongo) -> Iterator[TestClient]:
    kek = f"attack-tests-{secrets.token_hex(8)}"
    own = api_settings(
        settings, issuer=ISSUER, jwks_min_refresh_s=0.0, jwks_max_age_s=1.0, leeway_s=5, client_cache_ttl_s=0.0
    )
    own.api.key_encryption_key = SecretStr(kek)
    with TestClient(create_app(own, mongo=mongo)) as c:
        yield c
    mongo[CONTROL_DATABASE]["signing_keys"].delete_many({"kek_id": KeyEncryption(SecretStr(kek)).kek_id})


def _signing_key(client: TestClient) -> RSAKey:
    key = client.app.state.auth.keys.signing_key()  # type: ignore[attr-defined]
    assert isinstance(key, RSAKey)
    return key


def _get(client: TestClient, tenant: str, token: str) -> Any:
    return client.get(f"/v1/tenants/{tenant}/clients", headers={"Authorization": f"Bearer {token}"})


def _assert_invalid(response: Any, reason: str) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["www-authenticate"].startswith('Bearer realm="metalake", error="invalid_token"')
    assert reason in response.json()["detail"], response.json()


def test_attack_matrix(client: TestClient, tenant: str) -> None:
    record, _ = create_api_client(client, tenant=tenant, role="admin")
    key = _signing_key(client)
    header = {"alg": "RS256", "typ": "at+jwt", "kid": key.kid}
    now = int(time.time())

    def body(**overrides: Any) -> dict[str, Any]:
        base = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": record.client_id,
            "client_id": record.client_id,
            "tenant": tenant,
            "scope": "tenant:admin",
        }
        return claims(**{**base, **overrides})

    # The control: a token forged here but with everything right is accepted, so each refusal below is the attack.
    assert _get(client, tenant, sign(key, header, body())).status_code == 200

    public_pem = key.public_key.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    stranger = RSAKey.generate_key(2048, parameters={"kid": "not-published", "alg": "RS256"}, private=True)
    attacks: list[tuple[str, str, str]] = [
        ("expired", sign(key, header, body(exp=now - 120, iat=now - 1000, nbf=now - 1000)), "expired"),
        ("not yet valid", sign(key, header, body(nbf=now + 600)), "not yet valid"),
        ("wrong issuer", sign(key, header, body(iss="https://evil.example")), "iss"),
        ("wrong audience", sign(key, header, body(aud="some-other-api")), "aud"),
        ("alg none", unsigned({**header, "alg": "none"}, body()), "not a signed JWT"),
        ("alg none, signature kept", unsigned({**header, "alg": "none"}, body(), b"sig"), "algorithm"),
        ("HS256 with the RSA public key", hs256_with_public_key(public_pem, header, body()), "algorithm"),
        ("unknown kid", sign(stranger, {**header, "kid": "not-published"}, body()), "unknown signing key"),
        ("kid of the real key, signed by another", sign(stranger, header, body()), "signature"),
        ("wrong typ", sign(key, {**header, "typ": "JWT"}, body()), "typ"),
        ("no typ", sign(key, {"alg": "RS256", "kid": key.kid}, body()), "typ"),
        ("no client_id", sign(key, header, body(client_id=None)), "client_id"),
        ("garbage", "not-a-jwt", "not a signed JWT"),
    ]
    for name, token, reason in attacks:
        response = _get(client, tenant, token)
        assert response.status_code == 401, name
        _assert_invalid(response, reason)

    # Missing scope: a valid token without tenant:admin is 403 insufficient_scope, not 401.
    reader = _get(client, tenant, sign(key, header, body(scope="tenant:read")))
    assert reader.status_code == 403
    assert 'error="insufficient_scope"' in reader.headers["www-authenticate"]
    # A (validly signed) token of another tenant answers 404, as if this tenant did not exist.
    assert _get(client, tenant, sign(key, header, body(tenant=f"{tenant}-x"))).status_code == 404
    # Not a bearer scheme / no token at all.
    plain = client.get(f"/v1/tenants/{tenant}/clients", headers={"Authorization": "Basic Zm9vOmJhcg=="})
    assert plain.status_code == 401 and plain.headers["www-authenticate"] == 'Bearer realm="metalake"'


def test_rotated_key_stays_valid_until_retired(settings: Settings, mongo: Mongo, tenant: str) -> None:
    kek = f"rotation-tests-{secrets.token_hex(8)}"
    own = api_settings(
        settings,
        issuer=ISSUER,
        token_lifetime_s=60,
        leeway_s=5,
        jwks_min_refresh_s=0.0,
        jwks_max_age_s=0.5,
        client_cache_ttl_s=0.0,
    )
    own.api.key_encryption_key = SecretStr(kek)
    keys = mongo[CONTROL_DATABASE]["signing_keys"]
    try:
        with TestClient(create_app(own, mongo=mongo)) as client:
            record, secret = create_api_client(client, tenant=tenant, role="admin")
            old_token = request_token(client, record.client_id, secret)["access_token"]
            old_key = _signing_key(client)
            assert _get(client, tenant, old_token).status_code == 200

            before = time.time()
            rotated = client.app.state.auth.keys.rotate()  # type: ignore[attr-defined]
            assert rotated.kid != old_key.kid
            retired = next(k for k in client.app.state.auth.keys.keys() if k.kid == old_key.kid)  # type: ignore[attr-defined]
            assert not retired.active and retired.expires_at is not None
            # It stays published for one token lifetime plus the leeway: every token it signed expires before.
            assert abs(retired.expires_at.timestamp() - (before + 65)) < 15
            kids = {k["kid"] for k in client.get("/.well-known/jwks.json").json()["keys"]}
            assert {old_key.kid, rotated.kid} <= kids
            # Tokens of the old key still work; new tokens carry the new kid and work at once (unknown-kid refresh).
            assert _get(client, tenant, old_token).status_code == 200
            new_token = request_token(client, record.client_id, secret)["access_token"]
            header = json.loads(base64.urlsafe_b64decode(new_token.split(".")[0] + "=="))
            assert header["kid"] == rotated.kid
            assert _get(client, tenant, new_token).status_code == 200

            # The grace period ends (moved to the past here rather than waited for): the key leaves the JWKS, and even
            # a token that is otherwise valid (forged with the old private key and a far exp) is refused.
            keys.update_one({"_id": old_key.kid}, {"$set": {"expires_at": datetime.now(UTC) - timedelta(seconds=1)}})
            kids = {k["kid"] for k in client.get("/.well-known/jwks.json").json()["keys"]}
            assert old_key.kid not in kids and rotated.kid in kids
            time.sleep(0.6)  # the resource server's cached JWKS ages out (jwks_max_age_s)
            now = int(time.time())
            late = sign(
                old_key,
                {"alg": "RS256", "typ": "at+jwt", "kid": old_key.kid},
                claims(
                    iss=ISSUER,
                    aud=AUDIENCE,
                    sub=record.client_id,
                    client_id=record.client_id,
                    tenant=tenant,
                    scope="tenant:admin",
                    exp=now + 600,
                ),
            )
            _assert_invalid(_get(client, tenant, late), "unknown signing key")
            _assert_invalid(_get(client, tenant, old_token), "unknown signing key")
            assert (
                _get(client, tenant, request_token(client, record.client_id, secret)["access_token"]).status_code == 200
            )
            # The next rotation deletes the expired key for good.
            client.app.state.auth.keys.rotate()  # type: ignore[attr-defined]
            assert keys.find_one({"_id": old_key.kid}) is None
    finally:
        keys.delete_many({"kek_id": KeyEncryption(SecretStr(kek)).kek_id})


def _basic(user: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()}


def test_token_endpoint_throttle_attacks(settings: Settings, mongo: Mongo, tenant: str) -> None:
    form = {"grant_type": "client_credentials"}
    # One client under many spellings (authlib percent-decodes the Basic user name): one bucket of failures from this
    # address, throttled after 3.
    roomy_peer = api_settings(
        settings,
        token_failure_rate_per_s=0.01,
        token_failure_burst=3,
        token_peer_rate_per_s=1000.0,
        token_peer_burst=10_000,
    )
    with TestClient(create_app(roomy_peer, mongo=mongo)) as client:
        record, secret = create_api_client(client, tenant=tenant, role="read-only")
        cid = record.client_id
        spellings = [cid, f"%{ord(cid[0]):02x}{cid[1:]}", f"{cid[:-1]}%{ord(cid[-1]):02X}"]
        spellings += ["".join(f"%{ord(c):02x}" for c in cid), f"%{ord(cid[0]):02X}%{ord(cid[1]):02x}{cid[2:]}"]
        codes = [client.post("/oauth/token", data=form, headers=_basic(s, "wrong")).status_code for s in spellings]
        assert codes == [401, 401, 401, 429, 429], codes
        # The form spelling of the same client shares the bucket too; so does its right secret from this address,
        # until it refills (from another address it is not refused: tests/unit/api/auth/test_token_lockout.py).
        post = {**form, "client_id": cid, "client_secret": secret}
        assert client.post("/oauth/token", data=post).status_code == 429
        # Another client is not affected.
        other, other_secret = create_api_client(client, tenant=tenant, role="read-only")
        assert client.post("/oauth/token", data=form, headers=_basic(other.client_id, other_secret)).status_code == 200
    # A flood of made-up client ids from one address: throttled on the address, before any of them is looked up.
    roomy_clients = api_settings(
        settings, rate_limit_per_s=1000.0, rate_limit_burst=10_000, token_peer_rate_per_s=0.01, token_peer_burst=5
    )
    with TestClient(create_app(roomy_clients, mongo=mongo)) as client:
        headers = [_basic(f"mlc_{secrets.token_hex(8)}", "x") for _ in range(8)]
        codes = [client.post("/oauth/token", data=form, headers=h).status_code for h in headers]
        assert codes == [401] * 5 + [429] * 3, codes
        limited = client.post("/oauth/token", data=form, headers=_basic(f"mlc_{secrets.token_hex(8)}", "x"))
        assert limited.headers["content-type"] == "application/problem+json"
        assert int(limited.headers["retry-after"]) >= 1
        assert limited.json()["type"] == "/problems/rate-limited"


MiB = 1024 * 1024


class _Stream:
    """An ASGI ``receive`` that streams ``size`` bytes in chunks and counts how many the app took: proof of what the
    app read before it answered."""

    def __init__(self, size: int, chunk: int = 64 * 1024) -> None:
        self.size, self.chunk, self.consumed = size, chunk, 0

    async def __call__(self) -> dict[str, Any]:
        if self.consumed >= self.size:
            return {"type": "http.disconnect"}
        part = b"x" * min(self.chunk, self.size - self.consumed)
        self.consumed += len(part)
        return {"type": "http.request", "body": part, "more_body": self.consumed < self.size}


def _send_raw(
    client: TestClient, method: str, path: str, headers: dict[str, str], body: _Stream
) -> tuple[int, dict[str, str], dict[str, Any]]:
    """The app called as a server would, with ``body`` as its receive (chunked unless ``headers`` give a length)."""
    if "content-length" not in headers:
        headers = {**headers, "transfer-encoding": "chunked"}
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("203.0.113.7", 40000),
        "server": ("testserver", 80),
        "state": {},
    }
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(client.app(scope, body, send))  # type: ignore[arg-type]
    start = next(m for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    answer = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], answer, json.loads(payload)


def test_body_attacks(client: TestClient, tenant: str) -> None:
    """Bodies are bounded while read, and a protected route's token is checked before its body is read."""
    url = f"/v1/tenants/{tenant}/clients"
    json_type = {"content-type": "application/json"}
    # Anonymous (or with a bad token), a 60 MiB body streamed without a length: 401, not one byte read.
    for headers, slug in [
        (json_type, "missing-token"),
        ({**json_type, "authorization": "Bearer not-a-jwt"}, "invalid-token"),
        ({**json_type, "authorization": "Basic Zm9vOmJhcg=="}, "missing-token"),
    ]:
        body = _Stream(60 * MiB)
        status, answer, problem = _send_raw(client, "POST", url, headers, body)
        assert (status, problem["type"], body.consumed) == (401, f"/problems/{slug}", 0), problem
        assert answer["content-type"] == "application/problem+json" and answer["www-authenticate"].startswith("Bearer")
        assert answer["connection"] == "close"
    # Declared over the limit (1 MiB by default): 413 before anything is read, token or not.
    body = _Stream(60 * MiB)
    status, _, problem = _send_raw(client, "POST", url, {**json_type, "content-length": str(60 * MiB)}, body)
    assert (status, problem["type"], problem["field"], body.consumed) == (413, "/problems/body-too-large", "body", 0)
    # With a valid token, a chunked body is counted as it arrives: 413 as soon as it passes the limit.
    token = auth_headers(client, tenant=tenant, role="admin")
    body = _Stream(60 * MiB)
    status, _, problem = _send_raw(client, "POST", url, {**json_type, **token}, body)
    assert (status, problem["type"]) == (413, "/problems/body-too-large")
    assert MiB < body.consumed <= MiB + body.chunk
    # The token endpoint takes 8 KiB of form: a chunked one is refused once past it, never read whole.
    body = _Stream(60 * MiB, chunk=1024)
    form = {"content-type": "application/x-www-form-urlencoded"}
    status, _, problem = _send_raw(client, "POST", "/oauth/token", form, body)
    assert (status, problem["type"], problem["error"]) == (413, "/problems/request-too-large", "invalid_request")
    assert 8 * 1024 < body.consumed <= 9 * 1024
    # Public routes and 404s still answer without reading what they do not need.
    body = _Stream(60 * MiB)
    assert _send_raw(client, "POST", "/no/such/route", json_type, body)[0] == 404 and body.consumed == 0


def test_body_limit_setting_is_honoured(settings: Settings, mongo: Mongo, tenant: str) -> None:
    with TestClient(create_app(api_settings(settings, max_body_bytes=4096), mongo=mongo)) as client:
        url = f"/v1/tenants/{tenant}/clients"
        headers = {"content-type": "application/json", **auth_headers(client, tenant=tenant, role="admin")}
        # Under the limit the route parses it (not JSON: 422 naming the body); over it, 413 declared or streamed.
        small = client.post(url, content=b"x" * 4000, headers=headers)
        assert small.status_code == 422 and small.json()["type"] == "/problems/invalid-request"
        assert client.post(url, content=b"x" * 4097, headers=headers).status_code == 413
        body = _Stream(10_000, chunk=1000)
        status, _, problem = _send_raw(client, "POST", url, headers, body)
        assert (status, problem["detail"]) == (413, "the request body exceeds the limit of 4096 bytes")
        assert body.consumed == 5000
