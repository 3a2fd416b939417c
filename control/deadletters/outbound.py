"""An outbound dead letter handed back to the outbound runtime, which delivers it with its *current* subscription.

A delivery letter (``stage=outbound`` with ``outbound.subscription``) is the original change record. Its replay is
that record published to the outbound retry topic with the retry headers of a first attempt due now, for the one
subscription it failed for: the runtime's retry loop reads the subscription as it is now (destination, config,
secrets), delivers once, and on failure retries or dead-letters again as for any delivery. The delivery ledger keeps
a change delivered at most once per subscription. The replay is refused when the change no longer decodes, or the
subscription is gone or disabled (the runtime would drop it: a replay that cannot deliver is not "replayed").

The retry headers are the outbound runtime's wire contract (``processors.outbound.runtime.retry``; a unit test
reads a record built here with that module).
"""

from __future__ import annotations

import time

from control.deadletters.refusal import Refused
from control.deadletters.topics import StoredLetter
from control.subscriptions.store import SubscriptionStore
from metalake.events.changes import InvalidChange, decode_change
from metalake.kafka import RawRecord
from tenants.naming import retry_topic

RETRY_TOPIC = retry_topic("outbound")
_PREFIX = "outbound."


def replay_record(stored: StoredLetter, subscriptions: SubscriptionStore, now_ms: int | None = None) -> RawRecord:
    """The retry record that redelivers the letter's change to its subscription, or :class:`Refused`."""
    letter = stored.letter
    if letter.stage != "outbound" or not letter.subscription:
        raise Refused("the letter names no subscription to deliver to", "subscription", "NotReplayable")
    original = [(k, v) for k, v in stored.original_headers if not k.startswith(_PREFIX)]
    try:
        change = decode_change(stored.key, stored.value, original)
    except InvalidChange as exc:
        raise Refused(exc.reason, exc.field or "data", type(exc).__name__) from None
    if change.tenant != letter.tenant_id:
        raise Refused("the change is of another tenant", "ce_tenantid", "TenantMismatch")
    sub = subscriptions.get(change.tenant, letter.subscription)
    if sub is None or not sub.enabled:
        raise Refused("the subscription no longer exists or is disabled", "subscription", "UnknownSubscription")
    due = now_ms if now_ms is not None else int(time.time() * 1000)
    headers = [
        *original,
        ("outbound.subscription", sub.name.encode()),
        ("outbound.attempt", b"1"),
        ("outbound.due_ms", str(due).encode()),
        ("outbound.reason", f"replay of {stored.id}".encode()),
    ]
    return RawRecord(RETRY_TOPIC, change.id, stored.key, stored.value, headers)
