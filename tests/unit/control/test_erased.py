"""The erased URNs' keyed hash (not the plain sha256 anyone can compute from a guessed URN; old records still
matched) and the search of raw dead-letter bytes for erased URNs."""

from __future__ import annotations

import hashlib

from pydantic import SecretStr

from control.audit import AuditQuery
from control.erased import PLAIN, ErasedFilter, ErasedSet, urn_hasher, urns_in
from ops.settings import Settings
from processors.lake.scope import erase_target

URN = "urn:metalake:postgres:prod/shop/public/customers"
KEK = "a-test-key-encryption-key-of-32b"
OLD_KEK = "the-previous-key-encryption-key!"


def _settings(kek: str | None = KEK, previous: tuple[str, ...] = ()) -> Settings:
    settings = Settings()
    settings.api.key_encryption_key = SecretStr(kek) if kek else None
    settings.secrets.previous_key_encryption_keys = [SecretStr(p) for p in previous]
    return settings


def _sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def test_the_urn_hash_is_keyed_so_a_guessed_urn_cannot_be_tested_against_it() -> None:
    hasher = urn_hasher(_settings())
    digest = hasher.digest(URN)
    assert len(digest) == 64 and digest != _sha(URN)
    assert digest == urn_hasher(_settings()).digest(URN)  # stable: the API and the erase agree
    assert digest != urn_hasher(_settings("another-key-encryption-key-32by")).digest(URN)
    # The erase records the same keyed hash the API gave the erasure (audit rows, announcement, erased set).
    assert erase_target("acme", URN, False, hasher).target_hash == digest
    assert erase_target("acme", URN).target_hash == _sha(URN)  # no key configured: the plain hash, as before


def test_old_records_still_match_the_plain_sha256_and_a_previous_key() -> None:
    rotated = urn_hasher(_settings(KEK, previous=(OLD_KEK,)))
    before = urn_hasher(_settings(OLD_KEK)).digest(URN)
    assert rotated.digest(URN) == urn_hasher(_settings()).digest(URN)
    assert {before, _sha(URN), rotated.digest(URN)} <= rotated.candidates(URN)
    assert PLAIN.candidates(URN) == {_sha(URN)}


def test_an_audit_query_by_target_finds_every_hash_of_it() -> None:
    hashes = tuple(sorted(urn_hasher(_settings()).candidates(URN)))
    where = AuditQuery(target_hashes=hashes).where()
    assert all(h in where for h in hashes) and URN not in where


def test_urns_are_found_in_raw_bytes_and_compared_by_hash() -> None:
    raw = b'{"subject": "urn:metalake:postgres:prod\\/shop\\/public\\/customers", "n": 1}'
    assert urns_in([raw, None, b"acme:urn:metalake:kafka:c1/orders"]) == {URN, "urn:metalake:kafka:c1/orders"}
    hasher = urn_hasher(_settings())
    erased = ErasedFilter(ErasedSet(frozenset({hasher.digest(URN)})), hasher)
    assert erased.spells_erased([raw])
    assert not erased.spells_erased([b'"urn:metalake:postgres:prod/shop/public/customers_old"'])
    # An erasure recorded before the keyed hash (plain sha256) still hides the letters naming it.
    legacy = ErasedFilter(ErasedSet(trees=frozenset({_sha(URN)})), hasher)
    assert legacy.spells_erased([b"urn:metalake:postgres:prod/shop/public/customers/email"])
    assert not ErasedFilter(ErasedSet(), hasher).spells_erased([raw])
