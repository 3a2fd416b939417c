"""Monte Carlo's webhook signature, verified exactly as Monte Carlo computes it.

Header ``x-mcd-signature`` holds the hex HMAC-SHA512 of **not the raw body** but, per Monte Carlo's reference code::

    urllib.parse.urlencode(json.loads(raw_body)).encode("utf8")

``json.loads`` keeps the top-level key order, and ``urlencode`` turns each top-level value into ``str(value)``: nested
objects become Python ``repr`` strings (``{'id': '9a59...'}``), ``null`` becomes ``None``, ``true`` becomes ``True``.
So the check must run in Python, on the body as received and parsed by ``json.loads`` (the request's
:attr:`~control.connectors.plugin.InboundRequest.parsed`, parsed once for the whole webhook path), **before** any
model parsing or re-serialisation. As a defensive fallback (inferred, not documented by Monte Carlo) an HMAC over
the raw body bytes is accepted too.

Contract of :func:`verify_signature`:

- No usable secret (an empty list, or only empty secrets: an empty HMAC key proves nothing) ->
  :class:`AuthenticationFailed`.
- Missing or blank header -> :class:`AuthenticationFailed`, before the body is looked at.
- Each active secret (two during a rotation) is tried against both messages with :func:`hmac.compare_digest`.
- No match -> :class:`AuthenticationFailed`, unless the body is not JSON at all: then it could only have matched the
  raw-body fallback, and Monte Carlo's own algorithm cannot even be applied, so :class:`BodyNotJson` is raised.
  ``BodyNotJson`` is an :class:`InvalidPayload` (field ``(body)``) so that the runtime answers **400** (a malformed
  request), but it is a distinct class because the body is **unauthenticated**: the runtime must not dead-letter it
  (that would let anyone fill the DLQ). A non-JSON body that *does* match the raw-body fallback passes ``verify``
  and fails later in ``to_events`` with a plain ``InvalidPayload`` (authenticated, so it goes to the DLQ).

Messages never contain a secret, the received signature or the body. Monte Carlo signs no timestamp, so there is no
replay window: deduplication is the connector's job (``mapping.dedup_key``).
"""

from __future__ import annotations

import hashlib
import hmac
import urllib.parse
from collections.abc import Mapping, Sequence

from control.connectors.plugin import AuthenticationFailed, InvalidPayload, ParsedBody

HEADER = "x-mcd-signature"


class BodyNotJson(InvalidPayload):
    """The body is not JSON and matched no signature: answer 400, do not dead-letter (it is not authenticated)."""

    def __init__(self) -> None:
        super().__init__("body is not a JSON object, so its Monte Carlo signature cannot be verified", "(body)")


def signed_message(body: ParsedBody) -> bytes | None:
    """The bytes Monte Carlo signs for a body ``json.loads`` read as ``body``, or None if it is not a JSON object."""
    if not isinstance(body.value, dict):  # not JSON (no value), or JSON but not an object
        return None
    try:
        return urllib.parse.urlencode(body.value).encode("utf8")
    except (ValueError, TypeError, RecursionError):  # a lone surrogate cannot be UTF-8; too deeply nested to repr
        return None


def sign(secret: bytes, message: bytes) -> str:
    """Hex HMAC-SHA512 of ``message``: what Monte Carlo puts in the header for its signed message."""
    return hmac.new(secret, message, hashlib.sha512).hexdigest()


def header_value(headers: Mapping[str, str]) -> str | None:
    """The signature header, whatever the case of its name (the runtime lower-cases names; this does not rely on it)."""
    for name, value in headers.items():
        if name.lower() == HEADER:
            return value
    return None


def verify_signature(raw_body: bytes, parsed: ParsedBody, signature: str | None, secrets: Sequence[bytes]) -> None:
    """Return if ``signature`` matches the body (``raw_body`` as received, ``parsed`` as ``json.loads`` read it) under
    one of ``secrets``; raise otherwise (see module docstring)."""
    keys = [secret for secret in secrets if secret]
    if not keys:
        raise AuthenticationFailed("no Monte Carlo webhook secret is configured for this connector")
    if signature is None or not signature.strip():
        raise AuthenticationFailed(f"missing {HEADER} header")
    # hexdigest is lower-case; bytes so compare_digest accepts any header text (it rejects non-ASCII str).
    received = signature.strip().lower().encode("utf-8", "replace")
    message = signed_message(parsed)
    candidates = [raw_body] if message is None else [message, raw_body]
    for key in keys:
        for candidate in candidates:
            if hmac.compare_digest(sign(key, candidate).encode("ascii"), received):
                return
    if message is None:
        raise BodyNotJson()
    raise AuthenticationFailed(f"{HEADER} does not match the body for any active secret")
