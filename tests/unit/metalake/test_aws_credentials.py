"""The default AWS credential chain of metalake's own S3 client, against a loopback server playing STS, the container
endpoint and IMDSv2, and the S3 store that checks what signed the request."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import SecretStr

from metalake.aws_credentials import CredentialsError, DefaultCredentialChain, parse_sts_credentials
from metalake.lake_settings import LakeS3Settings
from metalake.s3 import S3Client, S3Error

EXPIRY = "2030-01-01T00:00:00Z"
STS_ANSWER = f"""<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult><Credentials>
    <AccessKeyId>ASIAWEB</AccessKeyId><SecretAccessKey>web-secret</SecretAccessKey>
    <SessionToken>web-session</SessionToken><Expiration>{EXPIRY}</Expiration>
  </Credentials></AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>"""


class _Aws(BaseHTTPRequestHandler):
    calls: ClassVar[list[tuple[str, str, dict[str, str], str]]] = []

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self) -> str:
        body = self.rfile.read(int(self.headers.get("content-length") or 0)).decode()
        self.calls.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        return body

    def do_POST(self) -> None:
        form = urllib.parse.parse_qs(self._record())
        ok = form.get("Action") == ["AssumeRoleWithWebIdentity"] and form.get("WebIdentityToken") == ["jwt-of-pod"]
        self._answer(200 if ok else 403, STS_ANSWER if ok else "<Error/>")

    def do_PUT(self) -> None:
        self._record()
        self._answer(200, "imds-token")

    def do_GET(self) -> None:
        self._record()
        creds = {"AccessKeyId": "ASIAIMDS", "SecretAccessKey": "s", "Token": "imds-session", "Expiration": EXPIRY}
        if self.path == "/latest/meta-data/iam/security-credentials/":
            self._answer(200, "node-role")
        elif self.path in ("/latest/meta-data/iam/security-credentials/node-role", "/pod-identity"):
            self._answer(200, json.dumps(creds))
        else:  # the bucket: a HEAD-like GET of the service, answered 200
            self._answer(200, "")

    def do_HEAD(self) -> None:
        self._record()
        self.send_response(200)
        self.end_headers()


@pytest.fixture
def aws() -> Iterator[str]:
    _Aws.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Aws)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    # A credentials file that does not exist: the developer's own ~/.aws must not leak into a test.
    return {"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_EC2_METADATA_DISABLED": "true", **extra}


def test_web_identity_is_exchanged_at_sts_and_its_session_token_signs_the_requests(aws: str, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("jwt-of-pod\n")
    env = _env(
        tmp_path,
        AWS_WEB_IDENTITY_TOKEN_FILE=str(token),
        AWS_ROLE_ARN="arn:aws:iam::123456789012:role/metalake-api",
        AWS_ENDPOINT_URL_STS=aws,
    )
    client = S3Client(aws, "eu-west-1", None, None, chain=DefaultCredentialChain("eu-west-1", env))
    client.head_bucket("lake")
    (_, _, _, form), (method, path, headers, _) = _Aws.calls
    assert urllib.parse.parse_qs(form)["RoleArn"] == ["arn:aws:iam::123456789012:role/metalake-api"]
    assert (method, path) == ("HEAD", "/lake")
    assert headers["x-amz-security-token"] == "web-session"
    assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=ASIAWEB/")
    assert "x-amz-security-token" in headers["authorization"].split("SignedHeaders=")[1]


def test_credentials_are_cached_until_five_minutes_before_they_expire(aws: str, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("jwt-of-pod")
    env = _env(tmp_path, AWS_WEB_IDENTITY_TOKEN_FILE=str(token), AWS_ROLE_ARN="arn:r", AWS_ENDPOINT_URL_STS=aws)
    chain = DefaultCredentialChain("eu-west-1", env)
    expiry = datetime(2030, 1, 1, tzinfo=UTC)
    chain.get(expiry - timedelta(hours=1))
    chain.get(expiry - timedelta(minutes=6))
    assert len(_Aws.calls) == 1
    chain.get(expiry - timedelta(minutes=4))
    assert len(_Aws.calls) == 2


def test_instance_profile_through_imdsv2(aws: str, tmp_path: Path) -> None:
    env = _env(tmp_path, AWS_EC2_METADATA_DISABLED="false", AWS_EC2_METADATA_SERVICE_ENDPOINT=aws)
    creds = DefaultCredentialChain("us-east-1", env).get()
    assert creds.access_key_id.get_secret_value() == "ASIAIMDS"
    assert creds.session_token is not None and creds.session_token.get_secret_value() == "imds-session"
    put, roles, role = _Aws.calls
    assert put[0] == "PUT" and roles[2]["x-aws-ec2-metadata-token"] == "imds-token"
    assert role[1].endswith("/node-role")


def test_container_endpoint_with_its_authorization_token_file(aws: str, tmp_path: Path) -> None:
    auth = tmp_path / "eks-pod-identity-token"
    auth.write_text("pod-identity-jwt")
    env = _env(
        tmp_path,
        AWS_CONTAINER_CREDENTIALS_FULL_URI=f"{aws}/pod-identity",
        AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(auth),
    )
    assert DefaultCredentialChain("us-east-1", env).get().access_key_id.get_secret_value() == "ASIAIMDS"
    assert _Aws.calls[0][2]["authorization"] == "pod-identity-jwt"


def test_environment_keys_come_first(aws: str, tmp_path: Path) -> None:
    env = _env(tmp_path, AWS_ACCESS_KEY_ID="AKENV", AWS_SECRET_ACCESS_KEY="s", AWS_CONTAINER_CREDENTIALS_FULL_URI=aws)
    assert DefaultCredentialChain("us-east-1", env).get().access_key_id.get_secret_value() == "AKENV"
    assert _Aws.calls == []


def test_shared_credentials_file_profile(tmp_path: Path) -> None:
    path = tmp_path / "credentials"
    path.write_text(
        "[default]\naws_access_key_id = AKDEF\naws_secret_access_key = x\n[ops]\naws_access_key_id = AKOPS\n"
    )
    env = {"AWS_SHARED_CREDENTIALS_FILE": str(path), "AWS_EC2_METADATA_DISABLED": "true"}
    assert DefaultCredentialChain("us-east-1", env).get().access_key_id.get_secret_value() == "AKDEF"
    with pytest.raises(CredentialsError, match="no AWS credentials"):  # the profile lacks its secret
        DefaultCredentialChain("us-east-1", {**env, "AWS_PROFILE": "ops"}).get()


def test_no_source_is_an_s3_error_naming_the_settings_without_secrets(tmp_path: Path) -> None:
    client = S3Client(
        "http://127.0.0.1:9", "us-east-1", None, None, chain=DefaultCredentialChain("us-east-1", _env(tmp_path))
    )
    with pytest.raises(S3Error, match=r"lake\.s3\.access_key_id") as caught:
        client.head_bucket("lake")
    assert caught.value.status == 0


def test_sts_refusal_names_the_source_only(aws: str, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("a-token-sts-refuses")
    env = _env(tmp_path, AWS_WEB_IDENTITY_TOKEN_FILE=str(token), AWS_ROLE_ARN="arn:r", AWS_ENDPOINT_URL_STS=aws)
    with pytest.raises(CredentialsError) as caught:
        DefaultCredentialChain("us-east-1", env).get()
    assert str(caught.value) == "AWS credentials from web identity (STS): HTTP 403"


def test_settings_without_keys_take_the_chain_and_with_keys_do_not() -> None:
    chained = S3Client.from_settings(LakeS3Settings(region="eu-west-1"))
    assert chained.chain is not None and chained.endpoint == "https://s3.eu-west-1.amazonaws.com"
    keyed = S3Client.from_settings(LakeS3Settings(access_key_id=SecretStr("AK"), secret_access_key=SecretStr("SK")))
    assert keyed.chain is None and keyed.credentials().session_token is None


def test_sts_answer_without_credentials_is_refused() -> None:
    with pytest.raises(CredentialsError, match="without credentials"):
        parse_sts_credentials(b'<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"/>')
