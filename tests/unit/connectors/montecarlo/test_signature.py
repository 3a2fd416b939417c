"""x-mcd-signature: HMAC-SHA512 over urlencode(json.loads(body)) exactly as Monte Carlo computes it, raw-body fallback.

The oracle ``_mc_reference`` is Monte Carlo's published verification code, written out here independently of the
module under test; the expected signed messages are literal strings, so a change in the algorithm fails a test.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.parse
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from connectors.montecarlo import BodyNotJson, MonteCarloConnector
from connectors.montecarlo.signature import signed_message, verify_signature
from control.connectors.plugin import AuthenticationFailed, InboundRequest, InvalidPayload, parse_json, parsed_key
from control.connectors.secrets import WebhookSecretDoc, rotated_webhook_secrets, usable_webhook_secrets

SECRET = b"mc-secret-aW4gcm90YXRpb24gMQ-0123456789abcdef"
NEW_SECRET = b"mc-secret-bmV3IHNlY3JldCAy-fedcba9876543210"
OTHER = b"not-the-configured-secret"
SAMPLE = (
    b'{"account":{"id":"9a59c6f1-203a-4c72-8cd7-132db7f21b92"},"action":"incident","type":"open_anomaly_incident",'
    b'"version":"v0.1","payload":{"incident_id":"f83867b6-8f25-428b-807c-08518f63384c","group_id":"zeus:ares",'
    b'"url":"https://getmontecarlo.com/incidents/f83867b6-8f25-428b-807c-08518f63384c",'
    b'"event_list":[{"event_details":"Has 42 rows vs. 101 expected","table_name":"artemis"}]}}'
)


def _mc_reference(secret: bytes, raw: bytes) -> str:
    """Monte Carlo's reference: hmac.new(secret, urlencode(json.loads(raw)).encode('utf8'), sha512).hexdigest()."""
    body = json.loads(raw)
    return hmac.new(secret, urllib.parse.urlencode(body).encode("utf8"), hashlib.sha512).hexdigest()


def _verify(body: bytes, signature: str | None, secrets: list[bytes]) -> None:
    verify_signature(body, parse_json(body), signature, secrets)


def _message(body: bytes) -> bytes | None:
    return signed_message(parse_json(body))


def _raw_hmac(secret: bytes, raw: bytes) -> str:
    return hmac.new(secret, raw, hashlib.sha512).hexdigest()


def _fails(body: bytes, signature: str | None, secrets: list[bytes]) -> AuthenticationFailed:
    with pytest.raises(AuthenticationFailed) as info:
        _verify(body, signature, secrets)
    message = str(info.value)
    for secret in secrets:  # the message is returned to the caller: it must not leak what it checked against
        if secret:
            assert secret.decode() not in message
    if signature and signature.strip():
        assert signature.strip() not in message
    return info.value


# --- the signed message ---------------------------------------------------------------------------------------------


def test_nested_objects_are_signed_as_python_repr() -> None:
    assert _message(b'{"account":{"id":"a1"},"action":"incident"}') == (
        b"account=%7B%27id%27%3A+%27a1%27%7D&action=incident"
    )


def test_literals_and_lists_are_signed_as_python_str() -> None:
    body = b'{"a":true,"b":null,"c":1.0,"d":[1,{"x":"y"}],"e":"sp ace&="}'
    assert _message(body) == b"a=True&b=None&c=1.0&d=%5B1%2C+%7B%27x%27%3A+%27y%27%7D%5D&e=sp+ace%26%3D"


def test_top_level_key_order_is_kept() -> None:
    assert _message(b'{"z":"1","a":"2"}') == b"z=1&a=2"


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b'"text"', b"\xff\xfe\x00", b"[" * 100_000])
def test_no_signed_message_for_a_body_that_is_not_a_json_object(body: bytes) -> None:
    assert _message(body) is None


# --- the matrix -----------------------------------------------------------------------------------------------------


def test_valid_signature() -> None:
    _verify(SAMPLE, _mc_reference(SECRET, SAMPLE), [SECRET])


def test_valid_signature_in_upper_case_hex_with_whitespace() -> None:
    _verify(SAMPLE, f" {_mc_reference(SECRET, SAMPLE).upper()}\t", [SECRET])


def test_tampered_body() -> None:
    signature = _mc_reference(SECRET, SAMPLE)
    tampered = SAMPLE.replace(b"42 rows", b"43 rows")
    _fails(tampered, signature, [SECRET])


def test_wrong_secret() -> None:
    _fails(SAMPLE, _mc_reference(OTHER, SAMPLE), [SECRET])


@pytest.mark.parametrize("signature", [None, "", "   "])
def test_missing_header(signature: str | None) -> None:
    assert "missing x-mcd-signature" in str(_fails(SAMPLE, signature, [SECRET]))


@pytest.mark.parametrize("secrets", [[], [b""]])
def test_no_usable_secret(secrets: list[bytes]) -> None:
    # An empty key is no key: anyone can compute HMAC(b"", body).
    assert "no Monte Carlo webhook secret" in str(_fails(SAMPLE, _mc_reference(b"", SAMPLE), secrets))


@pytest.mark.parametrize("signer", [SECRET, NEW_SECRET])
def test_either_secret_works_during_rotation(signer: bytes) -> None:
    _verify(SAMPLE, _mc_reference(signer, SAMPLE), [SECRET, NEW_SECRET])


def test_a_retired_secret_no_longer_works() -> None:
    _fails(SAMPLE, _mc_reference(SECRET, SAMPLE), [NEW_SECRET])


def test_reserialised_json_is_not_what_monte_carlo_signs() -> None:
    # The nested-dict case: signing a re-serialisation (what a framework's parsed body would give) must not verify,
    # and signing MC's repr form must: proof that the check runs on the bytes as received.
    body = b'{"b": {"nested": {"deep": [1, 2]}}, "a": "x"}'
    _verify(body, _mc_reference(SECRET, body), [SECRET])
    reserialised = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":")).encode()
    _fails(body, _raw_hmac(SECRET, reserialised), [SECRET])
    sorted_keys = urllib.parse.urlencode(sorted(json.loads(body).items())).encode()
    _fails(body, _raw_hmac(SECRET, sorted_keys), [SECRET])


def test_raw_body_fallback() -> None:
    _verify(SAMPLE, _raw_hmac(SECRET, SAMPLE), [SECRET])


def test_raw_body_fallback_with_the_second_secret() -> None:
    _verify(SAMPLE, _raw_hmac(NEW_SECRET, SAMPLE), [SECRET, NEW_SECRET])


def test_non_ascii_header_is_a_mismatch_not_a_crash() -> None:
    _fails(SAMPLE, "é" * 128, [SECRET])


def test_a_signature_is_not_accepted_by_prefix() -> None:
    _fails(SAMPLE, _mc_reference(SECRET, SAMPLE)[:64], [SECRET])


# --- bodies that are not JSON -----------------------------------------------------------------------------------------


def test_unsigned_non_json_body_is_a_400_not_a_dead_letter() -> None:
    with pytest.raises(BodyNotJson) as info:
        _verify(b"<xml/>", _raw_hmac(OTHER, b"<xml/>"), [SECRET])
    assert isinstance(info.value, InvalidPayload)
    assert not isinstance(info.value, AuthenticationFailed)
    assert info.value.field == "(body)"


def test_missing_header_wins_over_a_non_json_body() -> None:
    _fails(b"<xml/>", None, [SECRET])


def test_signed_non_json_body_passes_verify_and_is_refused_by_read(
    connector: MonteCarloConnector, request_for: Callable[..., InboundRequest]
) -> None:
    body = b"not json at all"
    request = request_for(body, {"x-mcd-signature": _raw_hmac(SECRET, body)})
    connector.verify(request, [SECRET])
    with pytest.raises(InvalidPayload) as info:
        connector.read(request)
    assert not isinstance(info.value, BodyNotJson)  # authenticated: it goes to the DLQ
    assert info.value.field == "(body)"


# --- through the connector ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("header", ["x-mcd-signature", "X-MCD-Signature"])
def test_connector_reads_the_header(
    header: str, connector: MonteCarloConnector, request_for: Callable[..., InboundRequest]
) -> None:
    connector.verify(request_for(SAMPLE, {header: _mc_reference(SECRET, SAMPLE)}), [SECRET])


def test_connector_refuses_other_headers(
    connector: MonteCarloConnector, request_for: Callable[..., InboundRequest]
) -> None:
    with pytest.raises(AuthenticationFailed, match="missing x-mcd-signature"):
        connector.verify(request_for(SAMPLE, {"x-signature": _mc_reference(SECRET, SAMPLE)}), [SECRET])


# --- the overlap after a rotation, and revocation -------------------------------------------------------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def _entry(secret_id: str, value: bytes, created: datetime) -> WebhookSecretDoc:
    # The selection never opens values: plain bytes stand in for the sealed ones here.
    return {"id": secret_id, "value": value.decode(), "created_at": created, "expires_at": None}


def _rotated(overlap: timedelta) -> list[WebhookSecretDoc]:
    return rotated_webhook_secrets([_entry("old", SECRET, T0)], _entry("new", NEW_SECRET, T0 + DAY), T0 + DAY, overlap)


def _usable(entries: list[WebhookSecretDoc], at: datetime) -> list[bytes]:
    return [str(e["value"]).encode() for e in usable_webhook_secrets(entries, at)]


@pytest.mark.parametrize(
    ("overlap", "after", "previous_verifies"),
    [
        (DAY, timedelta(hours=23), True),  # within the overlap
        (DAY, DAY, False),  # at its end
        (DAY, 2 * DAY, False),  # long after: a previous secret no longer lives until the next rotation
        (timedelta(hours=1), timedelta(hours=2), False),  # a shorter overlap asked by the rotation
        (timedelta(0), timedelta(0), False),  # overlap 0: retired at the rotation
    ],
)
def test_the_previous_secret_verifies_only_until_its_overlap_ends(
    overlap: timedelta, after: timedelta, previous_verifies: bool
) -> None:
    at = T0 + DAY + after
    secrets = _usable(_rotated(overlap), at)
    _verify(SAMPLE, _mc_reference(NEW_SECRET, SAMPLE), secrets)  # the newest always does
    if previous_verifies:
        _verify(SAMPLE, _mc_reference(SECRET, SAMPLE), secrets)
    else:
        _fails(SAMPLE, _mc_reference(SECRET, SAMPLE), secrets)


def test_a_revoked_previous_secret_verifies_nothing_during_its_overlap() -> None:
    entries = [e for e in _rotated(DAY) if e["id"] != "old"]  # what revoke_webhook_secret writes
    _fails(SAMPLE, _mc_reference(SECRET, SAMPLE), _usable(entries, T0 + DAY + timedelta(minutes=1)))


def test_rotating_again_neither_extends_an_overlap_nor_revives_an_expired_secret() -> None:
    first = _rotated(DAY)  # new (no end), old (ends T0 + 2 days)
    newest = _entry("newest", OTHER, T0 + 3 * DAY)
    # Rotating after old's overlap ended: new becomes the previous one, old is not carried into a new overlap.
    late = rotated_webhook_secrets(first, newest, T0 + 3 * DAY, DAY)
    assert [(e["id"], e["expires_at"]) for e in late] == [("newest", None), ("new", T0 + 4 * DAY)]
    assert _usable(late, T0 + 3 * DAY) == [OTHER, NEW_SECRET]
    # The newest revoked during the overlap, then a rotation with a longer overlap: old keeps its first end.
    revoked = [e for e in first if e["id"] != "new"]
    again = rotated_webhook_secrets(revoked, newest, T0 + DAY + timedelta(hours=1), 7 * DAY)
    assert [(e["id"], e["expires_at"]) for e in again] == [("newest", None), ("old", T0 + 2 * DAY)]


# --- what the signature does not authenticate (issue 12, item 14) ---------------------------------------------------
# Monte Carlo signs urlencode(json.loads(body)): one captured delivery verifies in every variant with the same signed
# message. The runtime keys a delivery the plugin cannot read by its parsed content (control.connectors.plugin's
# parsed_key, also the default dedup key), so spelling variants are one delivery; type variants parse differently and
# are bounded by connect.dead_letter_cap.

CAPTURED = b'{"account":{"id":"a1"},"action":"incident","owner":null,"muted":true,"rows":1.0,"note":"ok"}'
SPELLING_VARIANTS = {
    "re-indented": json.dumps(json.loads(CAPTURED), indent=2).encode(),
    "spaces around tokens": b" " + CAPTURED.replace(b":", b" : ").replace(b",", b" , ") + b"\n",
    "escaped letters": CAPTURED.replace(b'"ok"', b'"\\u006f\\u006b"'),
}
TYPE_VARIANTS = {
    "null as the string None": CAPTURED.replace(b'"owner":null', b'"owner":"None"'),
    "true as the string True": CAPTURED.replace(b'"muted":true', b'"muted":"True"'),
    "a float as its string": CAPTURED.replace(b'"rows":1.0', b'"rows":"1.0"'),
    "an object as its Python repr": CAPTURED.replace(b'{"id":"a1"}', b"\"{'id': 'a1'}\""),
}
NOT_VARIANTS = {
    "keys reordered": b'{"action":"incident","account":{"id":"a1"},"owner":null,"muted":true,"rows":1.0,"note":"ok"}',
    "a value changed": CAPTURED.replace(b'"ok"', b'"ko"'),
    "a key added": CAPTURED.replace(b"}", b',"x":1}', 1)[:-1] + b"}",
    "null as the string null": CAPTURED.replace(b'"owner":null', b'"owner":"null"'),
}


def _request(body: bytes) -> InboundRequest:
    return InboundRequest(headers={}, body=body, received_at=datetime(2026, 11, 26, tzinfo=UTC))


@pytest.mark.parametrize(
    "variant", [*SPELLING_VARIANTS.values(), *TYPE_VARIANTS.values()], ids=[*SPELLING_VARIANTS, *TYPE_VARIANTS]
)
def test_a_captured_signature_verifies_variants_of_its_body(variant: bytes) -> None:
    assert variant != CAPTURED
    _verify(variant, _mc_reference(SECRET, CAPTURED), [SECRET])


@pytest.mark.parametrize("variant", list(NOT_VARIANTS.values()), ids=list(NOT_VARIANTS))
def test_a_captured_signature_does_not_verify_other_content(variant: bytes) -> None:
    _fails(variant, _mc_reference(SECRET, CAPTURED), [SECRET])


@pytest.mark.parametrize("variant", list(SPELLING_VARIANTS.values()), ids=list(SPELLING_VARIANTS))
def test_spelling_variants_are_one_delivery_by_parsed_content(variant: bytes) -> None:
    assert parsed_key(_request(variant)) == parsed_key(_request(CAPTURED))


def test_type_variants_parse_differently_so_the_dead_letter_cap_bounds_them() -> None:
    keys = {parsed_key(_request(body)) for body in (CAPTURED, *TYPE_VARIANTS.values())}
    assert len(keys) == 1 + len(TYPE_VARIANTS)
