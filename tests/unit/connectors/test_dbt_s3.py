"""The dbt connector reading its artifacts from S3-compatible storage (``connectors.dbt.s3_objects``): the key pair as
secret fields, SigV4 (checked by a verifier written from the spec and proven on AWS's published GET Object example), the
SSRF guard, the size limits while streaming, and errors that name the field at fault, never a credential. The server
is a stand-in on loopback that checks every request's signature; the real one (SeaweedFS) is in
tests/integration/connectors/test_dbt_s3.py."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from pydantic import SecretStr

from api.services.connector_validation import InvalidConfig, validate_config
from connectors.dbt import DbtConfig, DbtConnector
from connectors.dbt.artifacts import ArtifactError
from connectors.dbt.connector import _unchanged_reads
from connectors.dbt.s3_objects import S3ObjectError, get_object
from control.connectors.plugin import ConnectorContext, SourceAccess, partition_key
from metalake.net.ssrf import AddressGuard
from metalake.s3 import S3Client

ARTIFACTS = Path(__file__).resolve().parents[2] / "fixtures" / "dbt_project" / "artifacts"
KEY_ID, SECRET = "AKIDDBTEXAMPLE", "dbt-secret-key-never-shown"
EMPTY = hashlib.sha256(b"").hexdigest()
LOOPBACK = AddressGuard.from_settings(["127.0.0.0/8"])


def _sign(secret: str, amz_date: str, region: str, canonical: str) -> str:
    day = amz_date[:8]
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = hmac.new(f"AWS4{secret}".encode(), day.encode(), hashlib.sha256).digest()
    for part in (region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def expected_signature(method: str, path: str, headers: dict[str, str], signed: list[str], secret: str) -> str:
    """The SigV4 signature of a request without query and body, written from AWS's specification (independent of
    metalake.s3): canonical request, string to sign, derived key."""
    canonical = "\n".join(
        [method, path, "", "".join(f"{h}:{headers[h].strip()}\n" for h in signed), ";".join(signed), EMPTY]
    )
    return _sign(secret, headers["x-amz-date"], "us-east-1", canonical)


def test_the_verifier_reproduces_awss_published_get_object_example() -> None:
    # "Example: GET Object" of AWS's "Signature Calculations for the Authorization Header" (S3 API reference).
    headers = {
        "host": "examplebucket.s3.amazonaws.com",
        "range": "bytes=0-9",
        "x-amz-content-sha256": EMPTY,
        "x-amz-date": "20130524T000000Z",
    }
    signature = expected_signature(
        "GET", "/test.txt", headers, sorted(headers), "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    )
    assert signature == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"


def test_the_client_signs_an_object_get_as_the_specification_says() -> None:
    client = S3Client(
        "https://s3.amazonaws.com", "us-east-1", SecretStr("AKIAIOSFODNN7EXAMPLE"),
        SecretStr("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"), path_style=False,
    )  # fmt: skip
    headers = client.signed_headers(
        "GET", "examplebucket.s3.amazonaws.com", "/test.txt", datetime(2013, 5, 24, tzinfo=UTC)
    )
    signature = expected_signature(
        "GET", "/test.txt", headers, ["host", "x-amz-content-sha256", "x-amz-date"],
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    )  # fmt: skip
    assert headers["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        f"SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={signature}"
    )


class StandIn:
    """An S3 stand-in: path-style GET of objects, every request's SigV4 signature verified against ``SECRET``."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}
        self.requests: list[str] = []
        self.conditional: list[str] = []
        self.hide_length = False
        self.trickle = False
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _error(self, status: int, code: str) -> None:
                body = f"<?xml version='1.0'?><Error><Code>{code}</Code></Error>".encode()
                self.send_response(status)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                stand_in.requests.append(self.path)
                auth = self.headers.get("authorization", "")
                match = re.fullmatch(
                    r"AWS4-HMAC-SHA256 Credential=([^/]+)/\d{8}/us-east-1/s3/aws4_request, "
                    r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})",
                    auth,
                )
                if match is None or match.group(1) != KEY_ID:
                    return self._error(403, "InvalidAccessKeyId")
                signed = match.group(2).split(";")
                headers = {h: self.headers.get(h, "") for h in signed}
                if match.group(3) != expected_signature("GET", self.path, headers, signed, SECRET):
                    return self._error(403, "SignatureDoesNotMatch")
                bucket, _, key = unquote(self.path).lstrip("/").partition("/")
                if bucket not in {b for b, _ in stand_in.objects}:
                    return self._error(404, "NoSuchBucket")
                body = stand_in.objects.get((bucket, key))
                if body is None:
                    return self._error(404, "NoSuchKey")
                etag = '"' + hashlib.md5(body).hexdigest() + '"'  # noqa: S324 - S3's ETag
                asked = self.headers.get("if-none-match")
                if asked is not None:
                    stand_in.conditional.append(self.path)
                    if asked == etag:
                        self.send_response(304)
                        self.send_header("etag", etag)
                        self.end_headers()
                        return None
                self.send_response(200)
                self.send_header("etag", etag)
                if stand_in.hide_length:
                    self.send_header("connection", "close")  # the body ends when the connection does
                else:
                    self.send_header("content-length", str(len(body)))
                self.end_headers()
                if not stand_in.trickle:
                    self.wfile.write(body)
                    return None
                try:  # a kilobyte every 50 ms, each within any read timeout
                    for i in range(0, len(body), 1024):
                        self.wfile.write(body[i : i + 1024])
                        self.wfile.flush()
                        time.sleep(0.05)
                except OSError:
                    pass  # the client gave up
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def s3() -> Iterator[StandIn]:
    _unchanged_reads.clear()
    stand_in = StandIn()
    for name in ("manifest.json", "catalog.json"):
        stand_in.objects[("dbt-artifacts", f"jaffle/target/{name}")] = (ARTIFACTS / name).read_bytes()
    yield stand_in
    stand_in.server.shutdown()
    stand_in.server.server_close()


def _config(endpoint: str, **kw: Any) -> DbtConfig:
    values: dict[str, Any] = {
        "manifest": "s3://dbt-artifacts/jaffle/target/manifest.json",
        "catalog": "s3://dbt-artifacts/jaffle/target/catalog.json",
        "instance": "wh",
        "s3_endpoint": endpoint,
        "s3_access_key_id": KEY_ID,
        "s3_secret_access_key": SECRET,
        **kw,
    }
    return DbtConfig.model_validate(values)


def _connector(config: DbtConfig, access: SourceAccess | None = None) -> DbtConnector:
    return DbtConnector(config, ConnectorContext("acme", "dbt", access=access or SourceAccess(LOOPBACK)))


def _offsets(records: list[Any], offsets: dict[str, Any] | None = None) -> dict[str, Any]:
    out = dict(offsets or {})
    for r in records:
        if r.forgets:
            out.pop(partition_key(r.partition), None)
        elif isinstance(r.offset, dict):
            out[partition_key(r.partition)] = r.offset
    return out


MANIFEST_PATH = "/dbt-artifacts/jaffle/target/manifest.json"
CATALOG_PATH = "/dbt-artifacts/jaffle/target/catalog.json"


def test_s3_artifacts_are_read_signed_and_an_unchanged_rerun_costs_nothing(
    s3: StandIn, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="connectors.dbt.connector")
    connector = _connector(_config(s3.endpoint))
    records = list(connector.poll({}))
    kinds = [r.event.type.rsplit(".", 2)[-2] for r in records]
    assert kinds.count("upserted") == 9 + 43 and kinds.count("added") == 9 + 29
    assert s3.requests == [MANIFEST_PATH, CATALOG_PATH] and s3.conditional == []
    offsets = _offsets(records)
    # Unchanged objects (ETags) and the offsets the last read left: two 304s, nothing downloaded or parsed.
    assert list(_connector(_config(s3.endpoint)).poll(offsets)) == []
    assert s3.conditional == [MANIFEST_PATH, CATALOG_PATH]
    assert [r.message for r in caplog.records if r.message.startswith("dbt.")][-1] == "dbt.artifacts_unchanged"
    # Offsets other than those (say a publish failed): everything is read again.
    caplog.clear()
    again = list(connector.poll({}))
    assert len(again) == len(records) and s3.requests[-2:] == [MANIFEST_PATH, CATALOG_PATH]
    # One artifact changed: the unchanged one is downloaded too, and what changed is emitted.
    offsets = _offsets(again)
    catalog = json.loads(s3.objects[("dbt-artifacts", "jaffle/target/catalog.json")])
    catalog["nodes"]["model.jaffle.customers"]["columns"]["full_name"]["type"] = "character varying"
    s3.objects[("dbt-artifacts", "jaffle/target/catalog.json")] = json.dumps(catalog).encode()
    s3.requests.clear()
    changed = list(connector.poll(offsets))
    assert s3.requests == [MANIFEST_PATH, CATALOG_PATH, MANIFEST_PATH]
    types = {r.event.data["urn"]: r.event.data.get("data_type") for r in changed if "data_type" in r.event.data}
    assert types["urn:metalake:postgres:wh/dbt_jaffle/marts/customers/full_name"] == "character varying"
    assert list(connector.poll(_offsets(changed, offsets))) == []


def test_keys_with_spaces_and_unicode_are_signed_as_sent(s3: StandIn) -> None:
    body = (ARTIFACTS / "manifest.json").read_bytes()
    s3.objects[("dbt-artifacts", "prod runs/été/manifest.json")] = body
    client = S3Client(s3.endpoint, "us-east-1", SecretStr(KEY_ID), SecretStr(SECRET))
    got = get_object(client, "dbt-artifacts", "prod runs/été/manifest.json", guard=LOOPBACK, max_bytes=len(body))
    assert got.body == body and got.etag == hashlib.md5(body).hexdigest()  # noqa: S324


def test_the_configuration_checks_locations_endpoint_and_key_pair() -> None:
    config = _config("https://s3.example.com/")
    assert config.on_s3 and config.s3_endpoint == "https://s3.example.com"
    assert SECRET not in repr(config) and SECRET not in config.model_dump_json()
    for bad in ("s3://Bad_Bucket/m.json", "s3://dbt-artifacts/", "s3://ab/m.json", "gs://bucket/m.json"):
        with pytest.raises(ValueError, match=r"s3://bucket/key|relative path or s3"):
            _config("https://s3.example.com", manifest=bad)
    for bad in ("ftp://s3.example.com", "https://user:pw@s3.example.com", "https://s3.example.com/?x=1", "s3.com"):
        with pytest.raises(ValueError, match="s3_endpoint"):
            _config(bad)
    with pytest.raises(ValueError, match="s3_secret_access_key is required"):
        DbtConfig(manifest="s3://dbt-artifacts/m.json", instance="wh", s3_access_key_id=KEY_ID)
    # A local path needs no key pair.
    assert not DbtConfig(manifest="jaffle/manifest.json", instance="wh").on_s3


def test_the_key_pair_is_stored_as_secret_fields_and_asked_again_for_another_endpoint() -> None:
    values = _config("https://s3.example.com").model_dump(mode="python")
    values = {k: v.get_secret_value() if isinstance(v, SecretStr) else v for k, v in values.items()}
    plain, secrets = validate_config(DbtConnector, values, {}, 1)
    assert set(secrets) == {"s3_access_key_id", "s3_secret_access_key"}
    assert "s3_secret_access_key" not in plain and SECRET not in json.dumps(plain)
    # Masked or left out: the stored pair is kept, for the same endpoint only.
    masked = {**plain, "s3_access_key_id": "**********"}
    assert validate_config(DbtConnector, masked, secrets, 1, previous=plain)[1] == secrets
    with pytest.raises(InvalidConfig, match="required again when config/s3_endpoint changes"):
        validate_config(DbtConnector, {**plain, "s3_endpoint": "https://evil.example.com"}, secrets, 1, plain)


def test_size_limits_name_the_setting_that_bound(s3: StandIn) -> None:
    with pytest.raises(ArtifactError, match=r"too-large: .*manifest.json \(manifest\) is larger than config/max_art"):
        list(_connector(_config(s3.endpoint, max_artifact_bytes=1024)).poll({}))
    capped = SourceAccess(LOOPBACK, max_artifact_bytes=2048)
    with pytest.raises(ArtifactError, match=r"larger than the worker's connect.artifact_max_bytes \(2048 bytes\)"):
        list(_connector(_config(s3.endpoint), capped).poll({}))
    # Without Content-Length the limit holds while streaming.
    s3.hide_length = True
    client = S3Client(s3.endpoint, "us-east-1", SecretStr(KEY_ID), SecretStr(SECRET))
    with pytest.raises(S3ObjectError, match="above the limit of 4096 bytes") as err:
        get_object(client, "dbt-artifacts", "jaffle/target/manifest.json", guard=LOOPBACK, max_bytes=4096)
    assert err.value.kind == "too-large"
    size = len(s3.objects[("dbt-artifacts", "jaffle/target/catalog.json")])
    assert (
        len(get_object(client, "dbt-artifacts", "jaffle/target/catalog.json", guard=LOOPBACK, max_bytes=size).body)
        == size
    )


def test_errors_name_the_object_and_the_field_never_the_secret(s3: StandIn, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(
        ArtifactError,
        match=r"not-found: .*no key 'jaffle/target/nope.json' in bucket 'dbt-artifacts' \(config/manifest\)",
    ):
        list(_connector(_config(s3.endpoint, manifest="s3://dbt-artifacts/jaffle/target/nope.json")).poll({}))
    with pytest.raises(ArtifactError, match=r"not-found: .*no bucket 'other-bucket' \(config/catalog\)"):
        list(_connector(_config(s3.endpoint, catalog="s3://other-bucket/catalog.json")).poll({}))
    wrong = "a-wrong-secret-value"
    with pytest.raises(ArtifactError) as denied:
        list(_connector(_config(s3.endpoint, s3_secret_access_key=wrong)).poll({}))
    assert denied.value.error_class == "access-denied"
    assert "config/s3_access_key_id" in str(denied.value) and "SignatureDoesNotMatch" in str(denied.value)
    assert wrong not in str(denied.value) and KEY_ID not in str(denied.value)
    assert all(wrong not in r.getMessage() and wrong not in str(r.__dict__) for r in caplog.records)
    assert all(SECRET not in str(r.__dict__) for r in caplog.records)


def test_the_ssrf_guard_and_an_unreachable_endpoint(s3: StandIn) -> None:
    # The worker's default guard refuses loopback: nothing reaches the server.
    with pytest.raises(ArtifactError, match="address-refused: the host of config/s3_endpoint"):
        list(_connector(_config(s3.endpoint), SourceAccess()).poll({}))
    assert s3.requests == []
    s3.server.shutdown()
    s3.server.server_close()
    with pytest.raises(ArtifactError, match=r"unreachable: the S3 endpoint \(config/s3_endpoint\) did not answer"):
        list(_connector(_config(s3.endpoint)).poll({}))


def test_a_trickling_download_stops_at_its_deadline(s3: StandIn) -> None:
    s3.trickle = True
    client = S3Client(s3.endpoint, "us-east-1", SecretStr(KEY_ID), SecretStr(SECRET), timeout_s=5.0)
    started = time.monotonic()
    with pytest.raises(S3ObjectError, match=r"not downloaded within 0\.3 s") as err:
        get_object(
            client, "dbt-artifacts", "jaffle/target/manifest.json", guard=LOOPBACK, max_bytes=10**8, deadline_s=0.3
        )
    assert err.value.kind == "timeout" and time.monotonic() - started < 2
    with pytest.raises(ArtifactError, match=r"timeout: .*\(manifest\): not downloaded within config/s3_download_dead"):
        list(_connector(_config(s3.endpoint, s3_download_deadline_s=1)).poll({}))
