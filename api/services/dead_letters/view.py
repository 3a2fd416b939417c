"""What of a dead letter a person sees: its context in full, its record's metadata, its payload without secrets.

The payload is what an admin needs to fix the cause (which warehouse or table a Monte Carlo incident names, which
field a transform refused), so it is shown, as parsed JSON, with two passes of redaction:

- the value of every key that names a secret (``secret``, ``token``, ``password``, ``signature``, ``authorization``,
  ``api_key``, ``credential``, ``private_key``, ``cookie``...) is replaced by ``[redacted]``, whatever it holds;
- any string that looks like a credential on its own (a bearer/basic header value, a JWT, a Slack token, a metalake
  write key, a PEM block) is replaced too, under whatever key it sits.

A payload that is not JSON, or bigger than ``dead_letters.payload_max_bytes``, is not shown at all (free text cannot
be redacted reliably): only its size and SHA-256, to compare it with what the sender kept. Headers are shown from an
allow-list (``content-type`` and the CloudEvents attributes); a signature header is never among them (the connector
worker does not even keep it), and the others are counted, not named.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

REDACTED = "[redacted]"
SHOWN_HEADERS = frozenset(
    {
        "content-type",
        "ce_specversion",
        "ce_id",
        "ce_source",
        "ce_type",
        "ce_subject",
        "ce_time",
        "ce_tenantid",
        "ce_partitionkey",
        "ce_dataschema",
    }
)
_SECRET_KEY = re.compile(
    r"secret|token|passw|pwd|signature|authori[sz]ation|api[-_]?key|apikey|credential|private[-_]?key|cookie|session"
    r"|webhook[-_]?url|dsn|connection[-_]?string",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(
    r"^\s*(bearer|basic)\s+\S+"  # an Authorization header's value
    r"|^eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\."  # a JWT
    r"|xox[abprs]-[A-Za-z0-9-]{8,}"  # a Slack token
    r"|^mlk_[0-9a-f]{8,}"  # a metalake write key
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|://[^/\s:@]+:[^/\s@]+@",  # a URL with a password in it
    re.IGNORECASE,
)
_MAX_DEPTH = 64


@dataclass(frozen=True)
class PayloadView:
    """The payload as shown: ``value`` (redacted JSON) when ``shown``, else why not (``note``)."""

    shown: bool
    size: int
    sha256: str | None
    value: Any = None
    note: str | None = None


def _redact(value: Any, depth: int = 0) -> Any:  # noqa: ANN401
    if depth > _MAX_DEPTH:
        return REDACTED  # nesting this deep is no metadata anyone reads: do not walk it
    if isinstance(value, dict):
        return {str(k): (REDACTED if _SECRET_KEY.search(str(k)) else _redact(v, depth + 1)) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v, depth + 1) for v in value]
    if isinstance(value, str) and _SECRET_VALUE.search(value):
        return REDACTED
    return value


def payload_view(value: bytes | None, max_bytes: int) -> PayloadView:
    """What :mod:`api.services.dead_letters.view` shows of a record's value (see the module docstring)."""
    if value is None:
        return PayloadView(False, 0, None, note="the record has no value")
    digest = hashlib.sha256(value).hexdigest()
    if len(value) > max_bytes:
        return PayloadView(False, len(value), digest, note=f"larger than {max_bytes} bytes: not shown")
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return PayloadView(False, len(value), digest, note="not JSON: not shown (free text cannot be redacted)")
    return PayloadView(True, len(value), digest, _redact(parsed))


def shown_headers(headers: list[tuple[str, bytes]]) -> tuple[dict[str, str], int]:
    """The allow-listed headers (decoded, the last of a repeated name wins) and how many others were hidden."""
    shown = {k: v.decode("utf-8", "replace") for k, v in headers if k.lower() in SHOWN_HEADERS}
    return shown, sum(1 for k, _ in headers if k.lower() not in SHOWN_HEADERS)


def key_text(key: bytes | None) -> str | None:
    """A record key as text: the DLQ keys are ``<tenant>:<connector>`` or an asset key, never a secret."""
    return None if key is None else key.decode("utf-8", "replace")[:512]
