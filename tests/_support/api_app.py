"""The admin API's real app (``api.app.create_app``) for unit tests, without MongoDB, Kafka or a signing key.

MongoDB is a ``MagicMock`` (routes that really need it get their dependency overridden by the test) and the token
gate a fake that admits bearer tokens spelled ``<tenant>:<client>`` (``acme:c1``) as that tenant's admin client:
``AuthenticateFirst``, the rate limits and the scope checks run as in production.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from unittest.mock import MagicMock

from fastapi import FastAPI

from api.app import create_app
from control.auth.principal import Principal, Scope
from control.auth.validator import InvalidToken, VerifiedToken
from ops.settings import Settings

ADMIN_SCOPES = frozenset({Scope.TENANT_ADMIN.value, Scope.TENANT_READ.value, Scope.SQL_READ.value})


class FakeGate:
    """Admits ``<tenant>:<client>`` as that tenant's admin client; anything else is an invalid token."""

    def __init__(self) -> None:
        self.checked: list[str] = []

    def admit(self, token: str) -> VerifiedToken:
        self.checked.append(token)
        tenant, sep, client = token.partition(":")
        if not sep or not tenant or not client:
            raise InvalidToken("not a token")
        principal = Principal(subject=client, tenant=tenant, scopes=ADMIN_SCOPES)
        return VerifiedToken(principal=principal, client_id=client, claims={})


def build_app(settings: Settings | None = None) -> tuple[FastAPI, FakeGate]:
    app = create_app(settings or Settings(), mongo=MagicMock())
    gate = FakeGate()
    app.state.auth = dataclasses.replace(app.state.auth, gate=gate)
    return app, gate


def bearer(tenant: str, client: str = "c1") -> dict[str, Any]:
    return {"Authorization": f"Bearer {tenant}:{client}"}
