"""Reading one object from S3-compatible storage for a source connector: a GET signed with :mod:`metalake.s3`'s
SigV4 signing, sent over a TCP connection to the address the SSRF guard checked (no second DNS lookup, no redirect
followed), its body streamed and refused past a size limit. Errors carry a class, the HTTP status and S3's error code,
never the credentials or a signature: the caller words them for its own configuration."""

from __future__ import annotations

import http.client
import re
import ssl
import time
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime

from metalake.net.pinned import pinned_connection
from metalake.net.ssrf import AddressGuard, RefusedAddress
from metalake.s3 import S3Client, S3Error

_CHUNK = 1024 * 1024
# S3 error answers are a few hundred bytes of XML; more is not read.
_MAX_ERROR_BODY = 8192
_ERROR_CODE = re.compile(rb"<Code>([A-Za-z0-9.]{1,64})</Code>")


class S3ObjectError(S3Error):
    """A GET failed. ``kind``: ``not-found`` (no bucket or key), ``access-denied``, ``too-large``,
    ``address-refused`` (the SSRF guard), ``unreachable`` (no answer), ``timeout`` (the download's deadline passed),
    ``refused`` (another status); ``code`` is S3's error code (``NoSuchKey``, ``AccessDenied``,
    ``PermanentRedirect``...) when the server sent one."""

    def __init__(self, kind: str, message: str, status: int = 0, code: str = "") -> None:
        super().__init__(message, status)
        self.kind = kind
        self.code = code


@dataclass(frozen=True)
class S3Object:
    """``body`` is None when the object still has the ETag the GET asked about (HTTP 304: nothing sent)."""

    body: bytes | None
    etag: str


def object_url(client: S3Client, bucket: str, key: str) -> tuple[str, str, str]:
    """(scheme://netloc, host header, canonical path) of ``key`` in ``bucket``: path style or virtual-hosted."""
    parts = urllib.parse.urlsplit(client.endpoint.rstrip("/"))
    if client.path_style:
        return f"{parts.scheme}://{parts.netloc}", parts.netloc, f"{parts.path}/{bucket}/{key}"
    host = f"{bucket}.{parts.netloc}"
    return f"{parts.scheme}://{host}", host, f"{parts.path}/{key}"


def get_object(  # noqa: PLR0913
    client: S3Client,
    bucket: str,
    key: str,
    *,
    guard: AddressGuard,
    max_bytes: int,
    tls: ssl.SSLContext | None = None,
    now: datetime | None = None,
    if_none_match: str | None = None,
    deadline_s: float | None = None,
) -> S3Object:
    """The object's bytes and ETag; :class:`S3ObjectError` if it cannot be read or is larger than ``max_bytes``
    (checked on ``Content-Length`` before reading, and again while streaming: a server may send more). With
    ``if_none_match`` (an ETag of an earlier GET), an object still at that ETag comes back without its body.
    ``deadline_s`` bounds the whole download (the timeout of the client bounds each connect and read only, so a
    server sending a byte at a time could otherwise hold the caller for hours)."""
    base, host, path = object_url(client, bucket, key)
    parts = urllib.parse.urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise S3ObjectError("refused", "the S3 endpoint must be an http(s) URL with a host")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    headers = client.signed_headers("GET", host, path, now or datetime.now(UTC))
    if if_none_match:
        # Not signed: SigV4 requires only host and x-amz-* headers, and a forged condition can only cost a download.
        headers["if-none-match"] = f'"{if_none_match}"'
    conn = pinned_connection(parts.scheme, parts.hostname, port, guard, client.timeout_s, tls)
    where = f"s3://{bucket}/{key}"
    try:
        # The same encoding the signature's canonical path used: S3 checks the path as it was sent.
        conn.request("GET", urllib.parse.quote(path, safe="/-_.~"), headers=headers)
        response = conn.getresponse()
        if response.status == 304 and if_none_match:
            return S3Object(None, (response.getheader("etag") or if_none_match).strip('"'))
        if response.status != 200:
            code = _error_code(response.read(_MAX_ERROR_BODY))
            raise _status_error(response.status, code, where)
        length = response.getheader("content-length")
        if length is not None and length.isdigit() and int(length) > max_bytes:
            raise S3ObjectError("too-large", f"{where} is {int(length)} bytes, above the limit of {max_bytes}", 200)
        chunks: list[bytes] = []
        size = 0
        started = time.monotonic()
        while chunk := response.read1(_CHUNK):
            if deadline_s is not None and time.monotonic() - started > deadline_s:
                raise S3ObjectError("timeout", f"{where}: not downloaded within {deadline_s:g} s")
            size += len(chunk)
            if size > max_bytes:
                raise S3ObjectError("too-large", f"{where} is above the limit of {max_bytes} bytes", 200)
            chunks.append(chunk)
        return S3Object(b"".join(chunks), (response.getheader("etag") or "").strip('"'))
    except RefusedAddress as exc:
        raise S3ObjectError("address-refused", f"the S3 endpoint {exc}") from None
    except (OSError, http.client.HTTPException) as exc:
        raise S3ObjectError("unreachable", f"S3 endpoint unreachable: {type(exc).__name__}") from None
    finally:
        conn.close()


def _error_code(body: bytes) -> str:
    match = _ERROR_CODE.search(body)
    return match.group(1).decode() if match else ""


def _status_error(status: int, code: str, where: str) -> S3ObjectError:
    detail = f"HTTP {status}" + (f" {code}" if code else "")
    if status == 404 or code in ("NoSuchKey", "NoSuchBucket"):
        what = {"NoSuchBucket": "no such bucket", "NoSuchKey": "no such key"}.get(code, "no such bucket or key")
        return S3ObjectError("not-found", f"{where}: {what} ({detail})", status, code)
    if status == 403:
        return S3ObjectError("access-denied", f"{where}: access denied ({detail})", status, code)
    if 300 <= status < 400 or code in ("PermanentRedirect", "AuthorizationHeaderMalformed"):
        return S3ObjectError("refused", f"{where}: refused ({detail}; is the region right?)", status, code)
    return S3ObjectError("refused", f"{where}: refused ({detail})", status, code)
