"""The API makes its signing key when it starts: Trino reads the JWKS at its own start and then rarely, so a key made
with the first token would be unknown to Trino meanwhile."""

from __future__ import annotations

from unittest.mock import MagicMock

from pydantic import SecretStr
from pymongo.errors import ServerSelectionTimeoutError

from api.app import publish_signing_key
from control.auth.settings import ApiSettings
from ops.settings import Settings


def _auth(**api: object) -> MagicMock:
    auth = MagicMock()
    auth.settings = Settings(api=ApiSettings(**api))
    return auth


def test_the_key_is_made_at_start_when_this_api_signs() -> None:
    auth = _auth(key_encryption_key=SecretStr("k" * 32))
    publish_signing_key(auth)
    auth.keys.signing_key.assert_called_once_with()


def test_nothing_is_made_for_an_external_issuer_or_without_a_key_encryption_key() -> None:
    for auth in (_auth(key_encryption_key=SecretStr("k" * 32), external_issuer="https://idp.example"), _auth()):
        publish_signing_key(auth)
        auth.keys.signing_key.assert_not_called()


def test_an_unreachable_mongodb_does_not_stop_the_start() -> None:
    auth = _auth(key_encryption_key=SecretStr("k" * 32))
    auth.keys.signing_key.side_effect = ServerSelectionTimeoutError("down")
    publish_signing_key(auth)
