"""How every metalake process connects to Trino: :func:`connect_args` builds the driver's arguments from settings, and
nothing else spells a host, a scheme, a CA or a credential (docs/serving.md).

With ``trino.https`` on (the default) a connection speaks TLS, verifies Trino's certificate against
``trino.ca_file`` (or the system's trust store) and authenticates:

- as a service user (``trino.user``, ``access.service_users``) with its password from ``trino.passwords``;
- as the platform user running the query as another user (``session_user``): Trino's impersonation, which the access
  rules allow the platform user for tenants' users only (:func:`tenants.access.rules.build_rules`);
- with a JWT (``token``): a tenant's own tools, whose Trino user the token names.

``trino.https`` off is the plain protocol: no TLS and no credentials (a user name is only claimed), kept for the
benchmark that measures what authentication costs.
"""

from __future__ import annotations

from typing import Any

import requests
import trino
from requests.adapters import HTTPAdapter
from trino.auth import Authentication, BasicAuthentication, JWTAuthentication

from metalake.settings import KernelSettings, SettingMissing, required


class _VerifiedWith(HTTPAdapter):
    """Verifies every HTTPS answer against one CA bundle. A session's ``verify`` is not enough: requests lets
    ``REQUESTS_CA_BUNDLE`` (set on many hosts) replace it, and Trino's certificate would then fail verification, or
    pass against a bundle it was not meant to."""

    def __init__(self, ca: str | bool) -> None:
        super().__init__()
        self._ca = ca

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]  # noqa: ANN401
        kwargs["verify"] = self._ca
        return super().send(request, **kwargs)


def http_session(settings: KernelSettings) -> requests.Session:
    """A session that verifies Trino's certificate against ``trino.ca_file`` (else the system's trust store)."""
    ca = settings.trino.ca_file
    session = requests.Session()
    session.mount("https://", _VerifiedWith(str(ca) if ca is not None else True))
    return session


def _password(settings: KernelSettings, user: str) -> str:
    secret = settings.trino.passwords.get(user)
    if secret is None:
        # Names the user and the variable, never a value.
        raise SettingMissing(
            f"settings: trino.passwords has no password for Trino user {user!r}; set METALAKE_TRINO__PASSWORDS "
            "(a JSON object of user to password; the local stack's tooling writes it)"
        )
    return secret.get_secret_value()


def connect_args(
    settings: KernelSettings,
    *,
    user: str | None = None,
    session_user: str | None = None,
    token: str | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``trino.dbapi.connect`` (host, port, scheme, TLS, credentials, user, catalog).

    ``user`` authenticates (default ``trino.user``) with its password; ``session_user`` is who the query runs as
    (default: ``user``), i.e. impersonation when they differ; ``token`` authenticates with a JWT instead of a
    password (the session user is then the token's unless ``session_user`` is given).
    """
    t = settings.trino
    host, port = required(t.host, "trino.host"), required(t.port, "trino.port")
    args: dict[str, Any] = {"host": host, "port": port, "http_scheme": t.http_scheme, "catalog": t.catalog}
    principal = user or t.user
    if not t.https:
        args["user"] = session_user or principal
        return args
    args["http_session"] = http_session(settings)
    auth: Authentication
    if token is not None:
        auth = JWTAuthentication(token)
        if session_user is not None:
            args["user"] = session_user
    else:
        auth = BasicAuthentication(principal, _password(settings, principal))
        args["user"] = session_user or principal
    args["auth"] = auth
    return args


def connect(
    settings: KernelSettings,
    *,
    user: str | None = None,
    session_user: str | None = None,
    token: str | None = None,
    **options: Any,  # noqa: ANN401
) -> trino.dbapi.Connection:
    """A DB-API connection with :func:`connect_args`; ``options`` (schema, source, timeouts...) are passed on."""
    conn: trino.dbapi.Connection = trino.dbapi.connect(
        **{**connect_args(settings, user=user, session_user=session_user, token=token), **options}
    )
    return conn
