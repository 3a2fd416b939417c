"""The webhook route as pure logic: every answer of the contract, with fakes for the stores and Kafka."""

from __future__ import annotations

import json
import logging

import pytest
from fastapi.testclient import TestClient

from connectors.runtime.webhooks import plugin_name
from control.connectors.plugin import InvalidPayload
from control.connectors.records import ConnectorRecord, ConnectorState, Tolerance
from metalake.http.problems import MEDIA_TYPE
from metalake.kafka.dlq import DeadLetter, read_dead_letter
from tests._support.runtime_fakes import World
from tests._support.runtime_plugins import SignedWebhook, sign

SECRET = "s3cret-s3cret-s3cret"
OLD_SECRET = "old-old-old-old-old"
URL = "/webhooks/test-hook/acme"


def _body(delivery: str = "d1", tables: list[dict[str, object]] | None = None) -> bytes:
    return json.dumps({"delivery": delivery, "tables": tables if tables is not None else [{"name": "orders"}]}).encode()


def _post(client: TestClient, body: bytes, secret: str = SECRET, url: str = URL) -> object:
    return client.post(url, content=body, headers={"x-test-signature": sign(secret, body)})


@pytest.fixture(autouse=True)
def connector(world: World) -> None:
    world.store.add(ConnectorRecord("acme", "hook", "testhook", {}), SECRET, OLD_SECRET)


def _problem(response: object, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text  # type: ignore[attr-defined]
    assert response.headers["content-type"] == MEDIA_TYPE  # type: ignore[attr-defined]
    body: dict[str, object] = response.json()  # type: ignore[attr-defined]
    assert {"type", "title", "status", "detail"} <= body.keys()
    assert body["status"] == status
    return body


def test_slug_names_the_plugin() -> None:
    assert plugin_name("monte-carlo") == "montecarlo"


def test_a_signed_delivery_is_published(client: TestClient, world: World) -> None:
    response = _post(client, _body())
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "accepted"
    [routed] = world.publisher.routed
    assert routed.event.tenantid == "acme"
    assert routed.event.partitionkey.startswith("acme:")
    assert routed.topic_class == "priority"


def test_the_previous_secret_still_verifies_during_rotation(client: TestClient, world: World) -> None:
    assert _post(client, _body(), secret=OLD_SECRET).status_code == 202


@pytest.mark.parametrize("secret", ["wrong-secret-wrong", None])
def test_bad_or_missing_signature_is_401(client: TestClient, world: World, secret: str | None) -> None:
    body = _body()
    headers = {} if secret is None else {"x-test-signature": sign(secret, body)}
    problem = _problem(client.post(URL, content=body, headers=headers), 401)
    assert problem["field"] == "signature"
    assert SECRET not in json.dumps(problem)
    assert world.publisher.routed == []


def test_a_suspended_tenant_is_403_after_the_signature_and_nothing_is_published(
    client: TestClient, world: World
) -> None:
    world.tenants.suspend("acme")
    problem = _problem(_post(client, _body()), 403)
    assert problem["type"] == "/problems/tenant-suspended" and problem["field"] == "tenant"
    # Unsigned, the answer is the signature's: the tenant's state is not told to anyone.
    _problem(_post(client, _body(), secret="wrong-secret-wrong"), 401)
    assert world.publisher.routed == []
    # Not recorded as seen: the same delivery is accepted once the tenant is resumed.
    world.tenants.records.clear()
    assert _post(client, _body()).status_code == 202


def test_tampered_body_is_401(client: TestClient) -> None:
    body = _body()
    _problem(client.post(URL, content=body + b" ", headers={"x-test-signature": sign(SECRET, body)}), 401)


@pytest.mark.parametrize(
    "url", ["/webhooks/test-hook/other", "/webhooks/test-hook/NOT_A_TENANT", "/webhooks/nope/acme"]
)
def test_unknown_tenant_connector_or_type_is_404(client: TestClient, url: str) -> None:
    _problem(_post(client, _body(), url=url), 404)


def test_no_active_secret_is_refused(client: TestClient, world: World) -> None:
    world.store.add(ConnectorRecord("beta", "hook", "testhook", {}))
    problem = _problem(_post(client, _body(), url="/webhooks/test-hook/beta"), 403)
    assert problem["type"] == "/problems/no-signing-secret"


def test_oversized_body_is_413_declared_or_streamed(client: TestClient, world: World) -> None:
    big = _body(tables=[{"name": f"t{i}"} for i in range(200)])
    assert len(big) > 2048
    _problem(_post(client, big), 413)

    def chunks() -> object:  # no Content-Length: the limit holds on the bytes read
        yield big[:1000]
        yield big[1000:]

    _problem(client.post(URL, content=chunks(), headers={"x-test-signature": sign(SECRET, big)}), 413)  # type: ignore[arg-type]
    assert world.publisher.routed == []


def test_malformed_json_is_400(client: TestClient) -> None:
    problem = _problem(_post(client, b'{"delivery": '), 400)
    assert problem["field"] == "body"
    assert problem["detail"] == "the body is not JSON (JSONDecodeError at byte 13)"


def test_json_nested_too_deep_to_parse_is_400_not_a_crash(client: TestClient, world: World) -> None:
    world.settings.connect.webhook_max_body_bytes = 200_000
    problem = _problem(_post(client, b"[" * 100_000), 400)  # deeper than json's limit on every Python we support
    assert problem["detail"] == "the body is not JSON (nested too deeply)"


def test_the_body_is_parsed_once_on_the_whole_path(
    client: TestClient, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[bytes] = []
    real = json.loads

    def counting(body: bytes) -> object:
        calls.append(body)
        return real(body)

    monkeypatch.setattr(json, "loads", counting)  # the one json.loads every route parses with
    body = _body("d-once")
    assert _post(client, body).status_code == 202  # verify, the JSON check, the dedup key, the mapping
    assert calls == [body]


# -- the plugin contract: read once, the dedup key of what it read (issue 24, item 2) ---------------------------------


def test_read_is_called_once_per_delivery_and_its_payload_reaches_dedup_key_and_to_events(
    client: TestClient, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[object] = []
    seen_by: dict[str, list[object]] = {"dedup_key": [], "to_events": []}
    real_read, real_key, real_map = SignedWebhook.read, SignedWebhook.dedup_key, SignedWebhook.to_events

    def read(self: SignedWebhook, request: object) -> object:
        reads.append(real_read(self, request))  # type: ignore[arg-type]
        return reads[-1]

    def dedup_key(self: SignedWebhook, payload: object, request: object) -> str:
        seen_by["dedup_key"].append(payload)
        return real_key(self, payload, request)  # type: ignore[arg-type]

    def to_events(self: SignedWebhook, payload: object, request: object) -> object:
        seen_by["to_events"].append(payload)
        return real_map(self, payload, request)  # type: ignore[arg-type]

    monkeypatch.setattr(SignedWebhook, "read", read)
    monkeypatch.setattr(SignedWebhook, "dedup_key", dedup_key)
    monkeypatch.setattr(SignedWebhook, "to_events", to_events)
    assert _post(client, _body("d-read")).status_code == 202
    assert len(reads) == 1
    assert seen_by["dedup_key"][0] is reads[0] and seen_by["to_events"][0] is reads[0]
    assert _post(client, _body("d-read")).json() == {"status": "duplicate"}
    assert len(reads) == 2 and len(seen_by["to_events"]) == 1  # a duplicate is read and keyed, never mapped


def test_the_plugins_dedup_key_is_used_when_it_overrides_the_default(client: TestClient, world: World) -> None:
    # SignedWebhook keys by "delivery": another content under a handled delivery id is that delivery again.
    assert _post(client, _body("d-same", [{"name": "orders"}])).status_code == 202
    again = _post(client, _body("d-same", [{"name": "items"}, {"name": "lines"}]))
    assert (again.status_code, again.json()) == (200, {"status": "duplicate"})
    assert [r.event.data["name"] for r in world.publisher.routed] == ["orders"]


def test_the_default_dedup_key_is_the_parsed_content(client: TestClient, world: World) -> None:
    # No "delivery" field: SignedWebhook falls back to the base class's key, which is the content, not the bytes.
    value = {"tables": [{"name": "orders"}], "note": "caf\u00e9"}
    first = _post(client, json.dumps(value).encode())
    respaced = _post(client, json.dumps(value, indent=2, ensure_ascii=False).encode())
    other = _post(client, json.dumps({**value, "note": "tea"}).encode())
    assert [first.status_code, respaced.status_code, other.status_code] == [202, 200, 202]
    assert respaced.json() == {"status": "duplicate"}
    assert len(world.publisher.routed) == 2


def test_a_body_read_refuses_is_dead_lettered_and_keyed_by_its_content(
    client: TestClient, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    def read(self: SignedWebhook, request: object) -> object:
        raise InvalidPayload("not a delivery of this plugin", "kind")

    monkeypatch.setattr(SignedWebhook, "read", read)
    value = {"delivery": "d-unread", "tables": [{"name": "orders"}]}
    response = _post(client, json.dumps(value).encode())
    assert (response.status_code, response.json()) == (202, {"status": "dead_lettered", "field": "kind"})
    assert _post(client, json.dumps(value, indent=1).encode()).json() == {"status": "duplicate"}
    [letter] = world.publisher.dead
    assert read_dead_letter(letter.headers).reason == "not a delivery of this plugin"
    assert world.publisher.routed == []


def test_unmappable_goes_to_the_dlq_with_202(client: TestClient, world: World) -> None:
    body = json.dumps({"delivery": "d9", "tables": "nope"}).encode()
    response = _post(client, body)
    assert response.status_code == 202
    assert response.json() == {"status": "dead_lettered", "field": "tables"}
    [letter] = world.publisher.dead
    assert (letter.topic, letter.key, letter.value) == ("metalake.connectors.dlq", b"acme:hook", body)
    assert not any(
        name.startswith("x-") for name, _ in letter.headers
    )  # request headers other than content-type stay out
    assert read_dead_letter(letter.headers) == DeadLetter(
        reason="tables must be a list",
        error_class="InvalidPayload",
        stage="mapping",
        tenant_id="acme",
        plugin="testhook",
        connector="hook",
        origin=f"webhook:{URL}",
        field="tables",
    )
    assert world.counter.calls == [{"plugin": "testhook", "stage": "mapping"}]
    assert _post(client, body).json() == {"status": "duplicate"}  # recorded once the DLQ record was confirmed


def test_tolerance_none_fails_the_connector(client: TestClient, world: World) -> None:
    world.store.add(ConnectorRecord("acme", "hook", "testhook", {}, errors_tolerance=Tolerance.NONE), SECRET)
    body = json.dumps({"delivery": "d9", "tables": "nope"}).encode()
    problem = _problem(_post(client, body), 503)
    assert problem["type"] == "/problems/connector-failed"
    record = world.store.get_connector("acme", "hook")
    assert record is not None and record.state is ConnectorState.FAILED
    assert record.error is not None and "InvalidPayload" in record.error
    assert world.publisher.dead == []
    _problem(_post(client, _body("d10")), 503)  # a FAILED connector accepts nothing until restarted


def test_redelivery_is_not_published_twice(client: TestClient, world: World) -> None:
    assert _post(client, _body()).status_code == 202
    second = _post(client, _body())
    assert second.status_code == 200
    assert second.json() == {"status": "duplicate"}
    assert len(world.publisher.routed) == 1


def test_kafka_down_is_503_and_nothing_is_recorded(client: TestClient, world: World) -> None:
    world.publisher.down = True
    problem = _problem(_post(client, _body()), 503)
    assert problem["type"] == "/problems/unavailable"
    world.publisher.down = False
    assert world.deliveries.seen_keys == {}
    assert _post(client, _body()).status_code == 202
    assert len(world.publisher.routed) == 1


def test_paused_connector_answers_503_with_retry_after(client: TestClient, world: World) -> None:
    world.store.set_state("acme", "hook", ConnectorState.PAUSED)
    response = _post(client, _body())
    _problem(response, 503)
    assert response.headers["retry-after"] == "30"  # type: ignore[attr-defined]


def test_secrets_that_do_not_open_are_a_503_the_sender_retries_never_a_pass(client: TestClient, world: World) -> None:
    world.store.secrets.unsealable.add("acme/hook")
    problem = _problem(_post(client, _body()), 503)
    assert problem["type"] == "/problems/secrets-unavailable" and "webhook_secrets" not in json.dumps(problem)
    assert world.publisher.routed == []


# -- one captured delivery in many variants (issue 12, item 14) ----------------------------------------------------


def test_variants_of_one_unmappable_body_are_one_dead_letter(client: TestClient, world: World) -> None:
    # A signature over a re-encoding of the parsed body (Monte Carlo's) verifies every spelling of one body; the
    # fake signs each spelling itself, as a captured delivery's signature would cover them.
    # No "delivery" field: the plugin cannot name the delivery, so the runtime keys it by its content.
    value = {"tables": "nope", "note": "caf\u00e9", "n": 9}
    spellings = [
        json.dumps(value).encode(),
        json.dumps(value, indent=4).encode(),
        json.dumps(value, separators=(",", ":")).encode(),
        json.dumps(value, ensure_ascii=False).encode(),
        b"\n\t " + json.dumps(value).encode() + b" \r\n",
        json.dumps(value).replace('"nope"', '"\\u006eope"').encode(),  # an escape for a plain letter
    ]
    answers = [_post(client, body).json()["status"] for body in spellings]
    assert answers == ["dead_lettered"] + ["duplicate"] * (len(spellings) - 1)
    assert len(world.publisher.dead) == 1


def test_dead_letters_over_the_connectors_cap_are_counted_and_dropped(
    client: TestClient, world: World, caplog: pytest.LogCaptureFixture
) -> None:
    budget = world.runtime.dead_letters
    assert budget is not None and budget.cap == world.settings.connect.dead_letter_cap == 1000
    budget.cap = 2
    with caplog.at_level(logging.WARNING, logger="connectors.runtime.errors"):
        answers = [
            _post(client, json.dumps({"delivery": f"d{i}", "tables": "nope"}).encode()).json()["status"]
            for i in range(4)
        ]
    assert answers == ["dead_lettered", "dead_lettered", "dead_letter_dropped", "dead_letter_dropped"]
    assert len(world.publisher.dead) == 2
    dropped = [r for r in caplog.records if r.getMessage() == "connect.dead_letters_dropped"]
    assert [(r.__dict__["connector"], r.__dict__["dropped"], r.__dict__["cap"]) for r in dropped] == [
        ("hook", 1, 2),
        ("hook", 1, 2),
    ]
    # A dropped delivery is remembered: its resend costs nothing.
    assert _post(client, json.dumps({"delivery": "d3", "tables": "nope"}).encode()).json()["status"] == "duplicate"
    # Another connector has its own budget.
    world.store.add(ConnectorRecord("acme", "other", "testhook", {}), SECRET)
    other = json.dumps({"delivery": "d3", "tables": "nope"}).encode()
    assert _post(client, other, url=f"{URL}/other").json()["status"] == "dead_lettered"
