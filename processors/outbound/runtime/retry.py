"""Retry scheduling: the backoff of short in-process retries and of the retry topic, and retry records.

A retry record is the original change (key, value, ``ce_`` headers) plus ``outbound.*`` headers naming the one
subscription to retry, the attempt number and the due time. Keeping the key keeps one asset's retries in order.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Sequence
from dataclasses import dataclass

from control.subscriptions.settings import OutboundSettings
from metalake.events.envelope import Headers

SUBSCRIPTION_HEADER = "outbound.subscription"
ATTEMPT_HEADER = "outbound.attempt"
DUE_HEADER = "outbound.due_ms"
REASON_HEADER = "outbound.reason"
_OUTBOUND_PREFIX = "outbound."
MAX_REASON = 300


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date); ``None`` if absent/bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True)
class RetryPolicy:
    short_attempts: int
    backoff_initial_s: float
    backoff_max_s: float
    retry_after_max_s: float
    retry_initial_s: float
    retry_max_s: float
    topic_max_attempts: int
    # One delivery's wall-clock bound (metalake.net.deadline), its short retries included.
    deadline_s: float = 30.0

    @classmethod
    def from_settings(cls, s: OutboundSettings) -> RetryPolicy:
        return cls(
            s.short_attempts,
            s.backoff_initial_s,
            s.backoff_max_s,
            s.retry_after_max_s,
            s.retry_initial_s,
            s.retry_max_s,
            s.retry_topic_max_attempts,
            s.delivery_deadline_s,
        )

    def short_delay(self, failed_attempts: int, retry_after_s: float | None) -> float | None:
        """Seconds to sleep before in-process attempt ``failed_attempts + 1``, or ``None`` to hand over to the
        retry topic (attempts used up, or the destination asks for a longer wait than a process should block)."""
        if failed_attempts >= self.short_attempts:
            return None
        if retry_after_s is not None:
            return retry_after_s if retry_after_s <= self.retry_after_max_s else None
        return float(min(self.backoff_initial_s * 2 ** (failed_attempts - 1), self.backoff_max_s))

    def topic_delay(self, topic_attempt: int, retry_after_s: float | None) -> float:
        """Delay before retry-topic attempt ``topic_attempt`` (1-based); a Retry-After wins if longer."""
        backoff = min(self.retry_initial_s * 2 ** (topic_attempt - 1), self.retry_max_s)
        return float(max(backoff, retry_after_s or 0.0))

    def exhausted(self, topic_attempt: int) -> bool:
        return topic_attempt > self.topic_max_attempts


@dataclass(frozen=True)
class RetryInfo:
    subscription: str
    attempt: int
    due_ms: int


def retry_headers(original: Sequence[tuple[str, bytes]], info: RetryInfo, reason: str) -> Headers:
    kept = [(k, v) for k, v in original if not k.startswith(_OUTBOUND_PREFIX)]
    return [
        *kept,
        (SUBSCRIPTION_HEADER, info.subscription.encode()),
        (ATTEMPT_HEADER, str(info.attempt).encode()),
        (DUE_HEADER, str(info.due_ms).encode()),
        (REASON_HEADER, reason[:MAX_REASON].encode()),
    ]


def read_retry_info(headers: Sequence[tuple[str, bytes | None]] | None) -> RetryInfo | None:
    found = {k: v.decode("utf-8", "replace") for k, v in headers or () if v is not None and k.startswith("outbound.")}
    try:
        return RetryInfo(found[SUBSCRIPTION_HEADER], int(found[ATTEMPT_HEADER]), int(found[DUE_HEADER]))
    except (KeyError, ValueError):
        return None
