"""The built-in OAuth 2 authorization server, built on authlib: client credentials in, RFC 9068 JWTs out.

authlib has no FastAPI integration for the server side, so this module is one: it turns a parsed token request into
authlib's :class:`OAuth2Request`, and authlib's answer into (status, body, headers). Clients authenticate with
``client_secret_basic`` or ``client_secret_post``; the token carries ``iss``, ``aud``, ``sub`` (the client id),
``client_id``, ``exp``, ``iat``, ``nbf``, ``jti``, ``scope`` and the tenant claim, signed with the active key of
:class:`~api.auth.keys.SigningKeyStore` (its ``kid`` in the header). A tenant client's token also names its Trino user
(claim ``trino.jwt.user_claim``) when its scopes hold ``sql:read``: ``tenant.<id>``, with ``.admin`` for
``tenant:admin`` and ``.pii`` for ``pii:read`` (as the SQL endpoint decides), so the same token opens Trino to the
tenant's own tools (docs/serving.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from authlib.oauth2.rfc6749 import AuthorizationServer, ClientMixin, OAuth2Request
from authlib.oauth2.rfc6749.grants import ClientCredentialsGrant
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload
from authlib.oauth2.rfc6749.util import extract_basic_authorization
from authlib.oauth2.rfc9068 import JWTBearerTokenGenerator
from joserfc.jwk import KeySet

from api.auth.keys import SigningKey, SigningKeyStore
from control.auth.clients import ClientRecord, ClientStore
from control.auth.principal import Scope
from control.auth.settings import ApiSettings
from tenants.naming import trino_user

log = logging.getLogger(__name__)

AUTH_METHODS = ("client_secret_basic", "client_secret_post")


def claimed_client_ids(headers: Mapping[str, str], form: Mapping[str, str]) -> set[str]:
    """Every client id whose secret authlib would check for this request, decoded exactly as authlib decodes it.

    The token endpoint throttles on these before authlib runs: keyed on the spelling instead, ``%61bc`` and ``abc`` (or
    Basic credentials in sloppy base64, which authlib decodes without validating) would be one client with unlimited
    buckets, each attempt an scrypt run. Basic comes from authlib's own parser (percent-decoded user name), the form
    value as parsed (authlib does not decode it again); both count, since authlib tries Basic, then the form.
    """
    ids: set[str] = set()
    try:
        basic_id, basic_secret = extract_basic_authorization(headers)
    except (UnicodeDecodeError, ValueError):
        # authlib fails on these too, before any secret check: the peer's bucket alone covers them.
        basic_id, basic_secret = None, None
    if basic_id and basic_secret:
        ids.add(str(basic_id))
    form_id, form_secret = form.get("client_id"), form.get("client_secret")
    if form_id and form_secret:
        ids.add(form_id)
    return ids


class OAuthClient(ClientMixin):  # type: ignore[misc]  # authlib is untyped
    """A stored client as authlib sees it."""

    def __init__(self, record: ClientRecord) -> None:
        self.record = record

    def get_client_id(self) -> str:
        return self.record.client_id

    def get_allowed_scope(self, scope: str | None) -> str | None:
        granted = list(self.record.scopes)
        if not scope:
            return " ".join(granted)
        wanted = scope.split()
        # Asking for a scope the client does not hold is an error (invalid_scope), not a silent downgrade.
        if not set(wanted) <= set(granted):
            return None
        return " ".join(s for s in granted if s in wanted)

    def check_client_secret(self, client_secret: str) -> bool:
        return self.record.verify(client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return endpoint == "token" and method in AUTH_METHODS

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type == "client_credentials"

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return False

    def get_default_redirect_uri(self) -> None:
        return None

    def check_response_type(self, response_type: str) -> bool:
        return False


class _ClientCredentials(ClientCredentialsGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = AUTH_METHODS


class _TokenGenerator(JWTBearerTokenGenerator):  # type: ignore[misc]
    def __init__(
        self,
        keys: SigningKeyStore,
        settings: ApiSettings,
        on_sign: Callable[[SigningKey], None],
        trino_user_claim: str | None,
    ) -> None:
        super().__init__(
            issuer=settings.issuer_url, alg=settings.signing_alg, expires_generator=settings.token_lifetime_s
        )
        self._keys = keys
        self._settings = settings
        self._on_sign = on_sign
        self._trino_user_claim = trino_user_claim

    def get_jwks(self) -> KeySet:
        key = self._keys.signing_key()
        self._on_sign(key)
        # A set with just the active key: joserfc then writes its kid into the header.
        return KeySet([key])

    def get_audiences(self, client: OAuthClient, user: object, scope: str) -> str:
        return self._settings.audience

    def get_extra_claims(self, client: OAuthClient, grant_type: str, user: object, scope: str) -> dict[str, Any]:
        claims: dict[str, Any] = {"nbf": int(time.time())}
        tenant = client.record.tenant
        if tenant is not None:
            claims[self._settings.tenant_claim] = tenant
            # The granted scopes (authlib's answer), never more than the client holds.
            user = token_trino_user(tenant, (scope or "").split())
            if self._trino_user_claim and user is not None:
                claims[self._trino_user_claim] = user
        return claims


def token_trino_user(tenant: str, scopes: Collection[str]) -> str | None:
    """The Trino user a tenant token with these scopes opens: none without ``sql:read`` (a token for ingest only
    must not query), the ``.pii`` one with ``pii:read`` and the ``.admin`` one with ``tenant:admin``, as the SQL
    endpoint decides."""
    if Scope.SQL_READ.value not in scopes:
        return None
    return trino_user(tenant, pii=Scope.PII_READ.value in scopes, admin=Scope.TENANT_ADMIN.value in scopes)


class _Request(OAuth2Request):  # type: ignore[misc]
    def __init__(self, uri: str, headers: Mapping[str, str], form: dict[str, str]) -> None:
        super().__init__(method="POST", uri=uri, headers=headers)
        self.payload = BasicOAuth2Payload(form)
        self._form = form

    @property
    def form(self) -> dict[str, str]:
        return self._form

    @property
    def args(self) -> dict[str, str]:
        return {}


TokenRequest = tuple[Mapping[str, str], dict[str, str]]
TokenAnswer = tuple[int, dict[str, Any], list[tuple[str, str]]]


class TokenServer(AuthorizationServer):  # type: ignore[misc]
    """Answers ``POST /oauth/token``; ``tenant_usable`` refuses clients of suspended tenants.

    ``on_sign`` sees every key a token is signed with: the app hands it to its own validator's key cache, so a token
    issued right after a rotation is accepted by the process that issued it without waiting for a JWKS refresh.
    ``trino_user_claim`` (None: none) is the claim that names a tenant client's Trino user.
    """

    def __init__(
        self,
        clients: ClientStore,
        keys: SigningKeyStore,
        settings: ApiSettings,
        tenant_usable: Callable[[str], bool],
        on_sign: Callable[[SigningKey], None] = lambda key: None,
        trino_user_claim: str | None = None,
    ) -> None:
        super().__init__(scopes_supported=[s.value for s in Scope])
        self._clients = clients
        self._settings = settings
        self._tenant_usable = tenant_usable
        self.register_grant(_ClientCredentials)
        self.register_token_generator("default", _TokenGenerator(keys, settings, on_sign, trino_user_claim))

    def query_client(self, client_id: str) -> OAuthClient | None:
        record = self._clients.get(client_id)
        if record is None or not record.active:
            return None
        if record.tenant is not None and not self._tenant_usable(record.tenant):
            log.info("token refused: tenant not active", extra={"client_id": client_id, "tenant": record.tenant})
            return None
        return OAuthClient(record)

    def save_token(self, token: dict[str, Any], request: OAuth2Request) -> None:
        # JWT access tokens are self-contained; only the fact of issuance is logged (never the token).
        log.info("token issued", extra={"client_id": request.client.get_client_id(), "scope": token.get("scope")})

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401
        return None

    def create_oauth2_request(self, request: TokenRequest) -> OAuth2Request:
        headers, form = request
        # authlib refuses non-TLS URIs; TLS terminates in front of the API, so the issuer URL stands in for ours.
        issuer = self._settings.issuer_url.rstrip("/")
        uri = issuer + "/oauth/token" if issuer.startswith("https://") else "https://localhost/oauth/token"
        return _Request(uri, headers, form)

    def handle_response(self, status: int, body: Any, headers: Any) -> TokenAnswer:  # noqa: ANN401
        return status, dict(body or {}), [(str(k), str(v)) for k, v in (headers or [])]

    def token(self, headers: Mapping[str, str], form: dict[str, str]) -> TokenAnswer:
        answer: TokenAnswer = self.create_token_response((headers, form))
        return answer
