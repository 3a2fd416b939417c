"""The few S3 calls metalake makes itself (the engines bring their own clients): is the lake's bucket there
(health checks), create it (the local stack). Requests are signed with AWS Signature Version 4 by the standard
library, so no deployable needs an AWS SDK for a probe. Errors name the status and the bucket, never a key."""

from __future__ import annotations

import hashlib
import hmac
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import SecretStr

from metalake.settings import LakeS3Settings, Settings

_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


class S3Error(RuntimeError):
    """An S3 request failed; ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


@dataclass(frozen=True)
class S3Client:
    endpoint: str
    region: str
    access_key_id: SecretStr
    secret_access_key: SecretStr
    path_style: bool = True
    timeout_s: float = 5.0

    @classmethod
    def from_settings(cls, s3: LakeS3Settings, timeout_s: float = 5.0) -> S3Client:
        if s3.access_key_id is None or s3.secret_access_key is None:
            raise S3Error("lake.s3.access_key_id and lake.s3.secret_access_key are unset", 0)
        endpoint = s3.endpoint or f"https://s3.{s3.region}.amazonaws.com"
        return cls(endpoint, s3.region, s3.access_key_id, s3.secret_access_key, s3.path_style, timeout_s)

    def _url(self, bucket: str) -> tuple[str, str, str]:
        """(url, host header, canonical path) of the bucket's root, or of the service (``bucket`` empty)."""
        parts = urllib.parse.urlsplit(self.endpoint.rstrip("/"))
        if self.path_style or not bucket:
            path = f"{parts.path}/{bucket}"
            return f"{parts.scheme}://{parts.netloc}{path}", parts.netloc, path
        host = f"{bucket}.{parts.netloc}"
        return f"{parts.scheme}://{host}/", host, "/"

    def signed_headers(self, method: str, host: str, path: str, now: datetime) -> dict[str, str]:
        """SigV4 headers of a request with no body and no query (what the calls below need)."""
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        day = amz_date[:8]
        headers = {"host": host, "x-amz-content-sha256": _EMPTY_SHA256, "x-amz-date": amz_date}
        names = ";".join(sorted(headers))
        canonical = "\n".join(
            [
                method,
                urllib.parse.quote(path, safe="/-_.~"),
                "",
                "".join(f"{k}:{headers[k]}\n" for k in sorted(headers)),
                names,
                _EMPTY_SHA256,
            ]
        )
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        key = _hmac(("AWS4" + self.secret_access_key.get_secret_value()).encode(), day)
        for part in (self.region, "s3", "aws4_request"):
            key = _hmac(key, part)
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={self.access_key_id.get_secret_value()}/{scope}, "
            f"SignedHeaders={names}, Signature={signature}"
        )
        return headers

    def _call(self, method: str, bucket: str) -> int:
        url, host, path = self._url(bucket)
        headers = self.signed_headers(method, host, path, datetime.now(UTC))
        request = urllib.request.Request(url, method=method, headers=headers)  # noqa: S310 - endpoint is configuration
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as resp:  # noqa: S310
                return int(resp.status)
        except urllib.error.HTTPError as e:
            return int(e.code)
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise S3Error(f"S3 endpoint unreachable: {type(reason).__name__}", 0) from None

    def list_buckets(self) -> None:
        """Returns if the service accepts these credentials (a signed ListBuckets); raises :class:`S3Error`."""
        status = self._call("GET", "")
        if status != 200:
            raise S3Error(f"S3 service refused the lake's credentials (HTTP {status})", status)

    def head_bucket(self, bucket: str) -> None:
        """Returns if the bucket exists and these credentials may use it; raises :class:`S3Error` otherwise."""
        status = self._call("HEAD", bucket)
        if status == 200:
            return
        what = {403: "access denied", 404: "no such bucket"}.get(status, "refused")
        raise S3Error(f"S3 bucket {bucket!r}: {what} (HTTP {status})", status)

    def create_bucket(self, bucket: str) -> bool:
        """Create the bucket (in the endpoint's default region); False if these credentials own it already."""
        status = self._call("PUT", bucket)
        if status == 200:
            return True
        if status == 409:
            self.head_bucket(bucket)
            return False
        raise S3Error(f"S3 bucket {bucket!r}: creation refused (HTTP {status})", status)


def delta_rs_storage_options(s3: LakeS3Settings) -> dict[str, str]:
    """delta-rs' ``storage_options`` for the lake's store. Its commits use S3's conditional PUT (``If-None-Match``):
    two delta-rs writers racing for one version cannot both win, so the audit tables (written by delta-rs only) stay
    safe with several writers and no lock table."""
    options = {
        "AWS_REGION": s3.region,
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false" if s3.path_style else "true",
        "conditional_put": "etag",
    }
    if s3.endpoint:
        options["AWS_ENDPOINT_URL"] = s3.endpoint
        options["AWS_ALLOW_HTTP"] = "true" if s3.endpoint.startswith("http://") else "false"
    if s3.access_key_id is not None and s3.secret_access_key is not None:
        options["AWS_ACCESS_KEY_ID"] = s3.access_key_id.get_secret_value()
        options["AWS_SECRET_ACCESS_KEY"] = s3.secret_access_key.get_secret_value()
    return options


def lake_storage_options(settings: Settings) -> dict[str, str] | None:
    """delta-rs' ``storage_options`` for the lake of ``settings``: None for a local folder."""
    return delta_rs_storage_options(settings.lake.s3) if settings.lake_on_s3 else None
