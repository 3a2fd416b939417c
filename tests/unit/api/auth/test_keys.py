"""The sealing of the authorization server's signing keys: pure functions, no database."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from api.auth.keys import KeyEncryption, KeysUnavailable


def test_sealed_keys_open_only_with_the_same_key_and_kid() -> None:
    enc = KeyEncryption(SecretStr("a-key-encryption-key"))
    sealed = enc.seal("kid-1", b'{"d": "private"}')
    assert b"private" not in sealed
    assert enc.open("kid-1", sealed) == b'{"d": "private"}'
    with pytest.raises(KeysUnavailable):
        enc.open("kid-2", sealed)  # the kid is bound as associated data
    other = KeyEncryption(SecretStr("another-encryption-key"))
    with pytest.raises(KeysUnavailable):
        other.open("kid-1", sealed)
    assert other.kek_id != enc.kek_id
    assert KeyEncryption(SecretStr("a-key-encryption-key")).kek_id == enc.kek_id
    with pytest.raises(KeysUnavailable):
        KeyEncryption(SecretStr("short"))
