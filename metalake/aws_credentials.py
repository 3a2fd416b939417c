"""AWS's default credential chain for metalake's own S3 calls (:mod:`metalake.s3`), in the standard library like
their signing, so that a process on AWS needs no static key: the environment's key pair, the shared credentials file,
a web identity token (IAM roles for service accounts on EKS: ``AWS_WEB_IDENTITY_TOKEN_FILE`` and ``AWS_ROLE_ARN``,
exchanged at STS), the container endpoint (EKS Pod Identity, ECS), then the instance profile (IMDSv2). The engines
take the same chain on their own: Spark's s3a (``DefaultCredentialsProvider``), delta-rs and Trino's native S3 file
system when no key pair is set. Temporary credentials are kept until five minutes before they expire; errors name the
source, never a credential or a token."""

from __future__ import annotations

import configparser
import json
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import SecretStr

_REFRESH_BEFORE = timedelta(minutes=5)
_STS_NS = "{https://sts.amazonaws.com/doc/2011-06-15/}"
_IMDS = "http://169.254.169.254"
_ECS = "http://169.254.170.2"


class CredentialsError(RuntimeError):
    """No source of the chain gave credentials, or the one configured failed."""


@dataclass(frozen=True)
class AwsCredentials:
    access_key_id: SecretStr
    secret_access_key: SecretStr
    session_token: SecretStr | None = None
    expires_at: datetime | None = None  # None: static keys, never refreshed


def _creds(key: str, secret: str, token: str | None, expires: str | None) -> AwsCredentials:
    when = datetime.fromisoformat(expires.replace("Z", "+00:00")) if expires else None
    return AwsCredentials(SecretStr(key), SecretStr(secret), SecretStr(token) if token else None, when)


def _call(
    url: str,
    timeout_s: float,
    source: str,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    data: bytes | None = None,
) -> bytes:
    """The body of one request to an AWS credentials endpoint; errors name the source and the status only."""
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})  # noqa: S310 - AWS's own
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:  # noqa: S310 - AWS's own endpoints
            return bytes(resp.read())
    except urllib.error.HTTPError as e:
        raise CredentialsError(f"AWS credentials from {source}: HTTP {e.code}") from None
    except (urllib.error.URLError, OSError) as e:
        raise CredentialsError(f"AWS credentials from {source}: {type(getattr(e, 'reason', e)).__name__}") from None


class DefaultCredentialChain:
    """The chain, resolved at the first :meth:`get` and cached (thread-safe) until near expiry. ``env`` and the
    endpoints are parameters for the tests; a process uses :func:`default_chain`."""

    def __init__(self, region: str, env: Mapping[str, str] | None = None, timeout_s: float = 2.0) -> None:
        self.region = region
        self.env = os.environ if env is None else env
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._cached: AwsCredentials | None = None

    def get(self, now: datetime | None = None) -> AwsCredentials:
        at = now or datetime.now(UTC)
        with self._lock:
            cached = self._cached
            if cached is None or (cached.expires_at is not None and cached.expires_at - _REFRESH_BEFORE <= at):
                self._cached = cached = self._resolve()
            return cached

    def _resolve(self) -> AwsCredentials:
        sources: list[Callable[[], AwsCredentials | None]] = [
            self._environment,
            self._shared_file,
            self._web_identity,
            self._container,
            self._instance_profile,
        ]
        for source in sources:
            found = source()
            if found is not None:
                return found
        raise CredentialsError(
            "no AWS credentials: set lake.s3.access_key_id and lake.s3.secret_access_key, or give the process a role "
            "(web identity, container or instance profile) or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        )

    def _environment(self) -> AwsCredentials | None:
        key, secret = self.env.get("AWS_ACCESS_KEY_ID"), self.env.get("AWS_SECRET_ACCESS_KEY")
        return _creds(key, secret, self.env.get("AWS_SESSION_TOKEN"), None) if key and secret else None

    def _shared_file(self) -> AwsCredentials | None:
        path = self.env.get("AWS_SHARED_CREDENTIALS_FILE") or str(Path.home() / ".aws" / "credentials")
        parser = configparser.RawConfigParser()
        if not parser.read(path):
            return None
        profile = self.env.get("AWS_PROFILE", "default")
        if not parser.has_section(profile):
            return None
        section = parser[profile]
        key, secret = section.get("aws_access_key_id"), section.get("aws_secret_access_key")
        return _creds(key, secret, section.get("aws_session_token"), None) if key and secret else None

    def _web_identity(self) -> AwsCredentials | None:
        token_file, role = self.env.get("AWS_WEB_IDENTITY_TOKEN_FILE"), self.env.get("AWS_ROLE_ARN")
        if not token_file or not role:
            return None
        try:
            token = Path(token_file).read_text().strip()
        except OSError as e:
            raise CredentialsError(f"AWS web identity token file unreadable: {type(e).__name__}") from None
        form = {
            "Action": "AssumeRoleWithWebIdentity",
            "Version": "2011-06-15",
            "RoleArn": role,
            "RoleSessionName": self.env.get("AWS_ROLE_SESSION_NAME") or "metalake",
            "WebIdentityToken": token,
        }
        endpoint = self.env.get("AWS_ENDPOINT_URL_STS") or f"https://sts.{self.region}.amazonaws.com"
        # The call is unsigned (the token is the proof); POST keeps the token out of any URL that gets logged.
        body = _call(
            endpoint.rstrip("/") + "/",
            self.timeout_s,
            "web identity (STS)",
            "POST",
            {"content-type": "application/x-www-form-urlencoded"},
            urllib.parse.urlencode(form).encode(),
        )
        return parse_sts_credentials(body)

    def _container(self) -> AwsCredentials | None:
        full, relative = (
            self.env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"),
            self.env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"),
        )
        if not full and not relative:
            return None
        url = full or _ECS + str(relative)
        headers: dict[str, str] = {}
        token_file = self.env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
        token = (
            Path(token_file).read_text().strip() if token_file else self.env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN")
        )
        if token:
            headers["authorization"] = token
        return _json_credentials(_call(url, self.timeout_s, "container", headers=headers))

    def _instance_profile(self) -> AwsCredentials | None:
        if self.env.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
            return None
        base = (self.env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT") or _IMDS).rstrip("/")
        ttl = {"x-aws-ec2-metadata-token-ttl-seconds": "21600"}
        try:
            token = _call(f"{base}/latest/api/token", self.timeout_s, "instance metadata", "PUT", ttl).decode()
        except CredentialsError:
            return None  # not on EC2 (or IMDS off): the chain ends without credentials
        headers = {"x-aws-ec2-metadata-token": token}
        roles_url = f"{base}/latest/meta-data/iam/security-credentials/"
        roles = _call(roles_url, self.timeout_s, "instance profile", headers=headers).decode().split()
        if not roles:
            raise CredentialsError("AWS credentials from instance profile: the instance has no role")
        body = _call(roles_url + roles[0], self.timeout_s, "instance profile", headers=headers)
        return _json_credentials(body)


def _json_credentials(body: bytes) -> AwsCredentials:
    """The container endpoint's and IMDS's answer: ``AccessKeyId``, ``SecretAccessKey``, ``Token``, ``Expiration``."""
    try:
        data: dict[str, Any] = json.loads(body)
        return _creds(data["AccessKeyId"], data["SecretAccessKey"], data.get("Token"), data.get("Expiration"))
    except (ValueError, KeyError, TypeError):
        raise CredentialsError("AWS credentials endpoint answered without credentials") from None


def parse_sts_credentials(body: bytes) -> AwsCredentials:
    """The ``Credentials`` of an ``AssumeRoleWithWebIdentityResponse``."""
    try:
        root = ET.fromstring(body)  # noqa: S314 - STS's answer, no DTDs or entities in it
    except ET.ParseError:
        raise CredentialsError("STS answered with something else than XML") from None
    found = root.find(f".//{_STS_NS}Credentials")
    if found is None:
        raise CredentialsError("STS answered without credentials")
    values = {child.tag.removeprefix(_STS_NS): child.text or "" for child in found}
    try:
        return _creds(
            values["AccessKeyId"], values["SecretAccessKey"], values.get("SessionToken"), values.get("Expiration")
        )
    except KeyError:
        raise CredentialsError("STS answered without an access key") from None


_chains: dict[str, DefaultCredentialChain] = {}
_chains_lock = threading.Lock()


def default_chain(region: str) -> DefaultCredentialChain:
    """The process's chain for ``region`` (one per process, so its temporary credentials are shared by every client:
    the health checks build a client per probe)."""
    with _chains_lock:
        chain = _chains.get(region)
        if chain is None:
            chain = _chains[region] = DefaultCredentialChain(region)
        return chain
