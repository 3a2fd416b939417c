"""The few S3 calls metalake makes itself (the engines bring their own clients): is the lake's bucket there
(health checks), create it (the local stack), list a prefix and delete every object under it (``metalake lake
drop``, tenant discovery). Requests are signed with AWS Signature Version 4 by the standard library, so no
deployable needs an AWS SDK for them: with the settings' key pair, else with AWS's default credential chain
(:mod:`metalake.aws_credentials`: web identity, container, instance profile). Errors name the status and the bucket,
never a credential."""

from __future__ import annotations

import base64
import hashlib
import hmac
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import SecretStr

from metalake.aws_credentials import AwsCredentials, CredentialsError, DefaultCredentialChain, default_chain
from metalake.lake_settings import LakeS3Settings
from metalake.settings import KernelSettings

_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
# The protocol's ceilings: a ListObjectsV2 page holds at most 1000 keys, a DeleteObjects request names at most 1000.
MAX_KEYS = 1000
MAX_DELETE = 1000


class S3Error(RuntimeError):
    """An S3 request failed; ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


@dataclass(frozen=True)
class S3Client:
    """A key pair signs every request; without one, ``chain`` gives them (temporary ones, with a session token)."""

    endpoint: str
    region: str
    access_key_id: SecretStr | None
    secret_access_key: SecretStr | None
    path_style: bool = True
    timeout_s: float = 5.0
    chain: DefaultCredentialChain | None = None

    @classmethod
    def from_settings(cls, s3: LakeS3Settings, timeout_s: float = 5.0) -> S3Client:
        """The settings' key pair if both halves are set, else the process's default AWS credential chain."""
        endpoint = s3.endpoint or f"https://s3.{s3.region}.amazonaws.com"
        if s3.access_key_id is not None and s3.secret_access_key is not None:
            return cls(endpoint, s3.region, s3.access_key_id, s3.secret_access_key, s3.path_style, timeout_s)
        return cls(endpoint, s3.region, None, None, s3.path_style, timeout_s, default_chain(s3.region))

    def credentials(self) -> AwsCredentials:
        if self.access_key_id is not None and self.secret_access_key is not None:
            return AwsCredentials(self.access_key_id, self.secret_access_key)
        if self.chain is None:
            raise S3Error("no S3 credentials: neither a key pair nor a credential chain", 0)
        try:
            return self.chain.get()
        except CredentialsError as e:
            raise S3Error(str(e), 0) from None

    def _url(self, bucket: str) -> tuple[str, str, str]:
        """(url, host header, canonical path) of the bucket's root, or of the service (``bucket`` empty)."""
        parts = urllib.parse.urlsplit(self.endpoint.rstrip("/"))
        if self.path_style or not bucket:
            path = f"{parts.path}/{bucket}"
            return f"{parts.scheme}://{parts.netloc}{path}", parts.netloc, path
        host = f"{bucket}.{parts.netloc}"
        return f"{parts.scheme}://{host}/", host, "/"

    def signed_headers(
        self,
        method: str,
        host: str,
        path: str,
        now: datetime,
        query: Sequence[tuple[str, str]] = (),
        payload_sha256: str = _EMPTY_SHA256,
    ) -> dict[str, str]:
        """SigV4 headers of a request to ``path`` with ``query`` and a body hashing to ``payload_sha256``."""
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        day = amz_date[:8]
        creds = self.credentials()
        headers = {"host": host, "x-amz-content-sha256": payload_sha256, "x-amz-date": amz_date}
        if creds.session_token is not None:
            headers["x-amz-security-token"] = creds.session_token.get_secret_value()
        names = ";".join(sorted(headers))
        canonical = "\n".join(
            [
                method,
                urllib.parse.quote(path, safe="/-_.~"),
                canonical_query(query),
                "".join(f"{k}:{headers[k]}\n" for k in sorted(headers)),
                names,
                payload_sha256,
            ]
        )
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        key = _hmac(("AWS4" + creds.secret_access_key.get_secret_value()).encode(), day)
        for part in (self.region, "s3", "aws4_request"):
            key = _hmac(key, part)
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={creds.access_key_id.get_secret_value()}/{scope}, "
            f"SignedHeaders={names}, Signature={signature}"
        )
        return headers

    def _request(
        self, method: str, bucket: str, query: Sequence[tuple[str, str]] = (), body: bytes = b""
    ) -> tuple[int, bytes]:
        """(status, body) of one signed request; :class:`S3Error` (status 0) when the endpoint does not answer."""
        url, host, path = self._url(bucket)
        headers = self.signed_headers(method, host, path, datetime.now(UTC), query, hashlib.sha256(body).hexdigest())
        if body:
            # DeleteObjects requires an integrity header; Content-MD5 is the one every S3 implementation takes.
            headers["content-md5"] = base64.b64encode(hashlib.md5(body, usedforsecurity=False).digest()).decode()
        if query:
            url += "?" + canonical_query(query)
        request = urllib.request.Request(  # noqa: S310 - endpoint is configuration
            url, data=body or None, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as resp:  # noqa: S310
                return int(resp.status), resp.read()
        except urllib.error.HTTPError as e:
            return int(e.code), e.read()
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise S3Error(f"S3 endpoint unreachable: {type(reason).__name__}", 0) from None

    def _call(self, method: str, bucket: str) -> int:
        return self._request(method, bucket)[0]

    def list_page(
        self, bucket: str, prefix: str, delimiter: str | None = None, token: str | None = None, max_keys: int = MAX_KEYS
    ) -> ListPage:
        """One ListObjectsV2 page of the keys under ``prefix`` (and, with ``delimiter``, the common prefixes)."""
        query = [("list-type", "2"), ("max-keys", str(max_keys)), ("prefix", prefix)]
        if delimiter is not None:
            query.append(("delimiter", delimiter))
        if token is not None:
            query.append(("continuation-token", token))
        status, body = self._request("GET", bucket, query)
        if status != 200:
            raise S3Error(f"S3 bucket {bucket!r}: listing refused (HTTP {status}{_code(body)})", status)
        return parse_list_page(body)

    def list_objects(
        self, bucket: str, prefix: str, delimiter: str | None = None, max_keys: int = MAX_KEYS
    ) -> Iterator[ListPage]:
        """Every page under ``prefix``, following the continuation tokens until the listing is complete."""
        token: str | None = None
        while True:
            page = self.list_page(bucket, prefix, delimiter, token, max_keys)
            yield page
            if not page.truncated:
                return
            if not page.next_token:
                raise S3Error(f"S3 bucket {bucket!r}: a truncated listing without a continuation token", 200)
            token = page.next_token

    def common_prefixes(self, bucket: str, prefix: str) -> list[str]:
        """The "folders" directly under ``prefix`` (which ends with '/'), their names only, sorted."""
        found: set[str] = set()
        for page in self.list_objects(bucket, prefix, "/"):
            found |= {p[len(prefix) :].rstrip("/") for p in page.prefixes if p.startswith(prefix)}
        return sorted(n for n in found if n)

    def has_objects(self, bucket: str, prefix: str) -> bool:
        return bool(self.list_page(bucket, prefix, max_keys=1).keys)

    def delete_objects(self, bucket: str, keys: Sequence[str]) -> int:
        """Delete ``keys`` (DeleteObjects, up to 1000 a request); the number deleted. A key already gone counts as
        deleted (S3 answers so), which makes a rerun after a crash midway quiet. :class:`S3Error` naming the first
        refused key otherwise."""
        done = 0
        for start in range(0, len(keys), MAX_DELETE):
            chunk = keys[start : start + MAX_DELETE]
            status, body = self._request("POST", bucket, [("delete", "")], delete_body(chunk))
            if status != 200:
                raise S3Error(f"S3 bucket {bucket!r}: deletion refused (HTTP {status}{_code(body)})", status)
            failed = parse_delete_errors(body)
            if failed:
                key, code = failed[0]
                raise S3Error(f"S3 bucket {bucket!r}: {len(failed)} objects not deleted, first {key!r}: {code}", status)
            done += len(chunk)
        return done

    def delete_prefix(self, bucket: str, prefix: str, first: Sequence[str] = (), page_size: int = MAX_KEYS) -> int:
        """Delete every object under ``prefix`` (a "folder": it must end with '/', so ``acme/`` never reaches
        ``acme2/``), page after page; the number of objects deleted. Keys under one of the ``first`` sub-prefixes go
        before the others of their page (a Delta table's ``_delta_log/``: a crash midway then leaves loose files, not
        a table whose log names files that are gone)."""
        if not prefix.endswith("/") or prefix == "/":
            raise ValueError(f"refusing to delete under {prefix!r}: a prefix must name a folder (end with '/')")
        deleted = 0
        previous: set[str] = set()
        while True:
            # Deleting while paging would shift the pages: list one page, delete it, list again from the start.
            page = self.list_page(bucket, prefix, max_keys=page_size)
            if not page.keys:
                return deleted
            if previous.issuperset(page.keys):  # a store that acknowledges deletions it did not make: no endless loop
                raise S3Error(f"S3 bucket {bucket!r}: objects under {prefix!r} are still listed after deletion", 200)
            ordered = sorted(page.keys, key=lambda k: (not any(f"/{f}/" in f"/{k}" for f in first), k))
            deleted += self.delete_objects(bucket, ordered)
            previous = set(ordered)

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


@dataclass(frozen=True)
class ListPage:
    """One ListObjectsV2 answer: object keys, common prefixes (with a delimiter), and where the next page starts."""

    keys: list[str] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    truncated: bool = False
    next_token: str | None = None


def canonical_query(query: Sequence[tuple[str, str]]) -> str:
    """SigV4's canonical query string (also what is sent): names and values RFC 3986-encoded, sorted."""
    encoded = sorted((urllib.parse.quote(k, safe="-_.~"), urllib.parse.quote(v, safe="-_.~")) for k, v in query)
    return "&".join(f"{k}={v}" for k, v in encoded)


def _text(element: ET.Element, tag: str) -> str | None:
    found = element.find(_NS + tag)
    if found is None:
        found = element.find(tag)  # some S3-compatible servers answer without the namespace
    return None if found is None else (found.text or "")


def _all(element: ET.Element, tag: str) -> list[ET.Element]:
    return element.findall(_NS + tag) or element.findall(tag)


def parse_list_page(body: bytes) -> ListPage:
    """A ListObjectsV2 result document (``ListBucketResult``)."""
    root = ET.fromstring(body)  # noqa: S314 - the configured store's answer, no DTDs or entities in it
    keys = [k for c in _all(root, "Contents") if (k := _text(c, "Key"))]
    prefixes = [p for c in _all(root, "CommonPrefixes") if (p := _text(c, "Prefix"))]
    truncated = (_text(root, "IsTruncated") or "false").strip().lower() == "true"
    return ListPage(keys, prefixes, truncated, _text(root, "NextContinuationToken") or None)


def delete_body(keys: Sequence[str]) -> bytes:
    """A quiet DeleteObjects request: the answer lists the failures only."""
    root = ET.Element("Delete", xmlns=_NS.strip("{}"))
    ET.SubElement(root, "Quiet").text = "true"
    for key in keys:
        ET.SubElement(ET.SubElement(root, "Object"), "Key").text = key
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))


def parse_delete_errors(body: bytes) -> list[tuple[str, str]]:
    """(key, code) of each object a DeleteObjects request did not delete."""
    if not body.strip():
        return []
    root = ET.fromstring(body)  # noqa: S314 - the configured store's answer
    return [(_text(e, "Key") or "", _text(e, "Code") or "") for e in _all(root, "Error")]


def _code(body: bytes) -> str:
    """The S3 error code of an error answer, if it has one (``: NoSuchBucket``): never its message or resource."""
    try:
        code = _text(ET.fromstring(body), "Code") if body.strip() else None  # noqa: S314
    except ET.ParseError:
        return ""
    return f": {code}" if code else ""


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


def lake_storage_options(settings: KernelSettings) -> dict[str, str] | None:
    """delta-rs' ``storage_options`` for the lake of ``settings``: None for a local folder."""
    return delta_rs_storage_options(settings.lake.s3) if settings.lake_on_s3 else None


def lake_s3_client(settings: KernelSettings) -> S3Client | None:
    """The lake store's client for metalake's own calls (``lake.s3.request_timeout_s``); None for a local lake."""
    if not settings.lake_on_s3:
        return None
    return S3Client.from_settings(settings.lake.s3, settings.lake.s3.request_timeout_s)
