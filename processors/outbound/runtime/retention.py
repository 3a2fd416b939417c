"""Keeps the delivery ledger bounded where the server cannot: a pruning pass on a timer when there is no TTL index.

On MongoDB the TTL index on ``expires_at`` deletes expired ledger documents by itself; FerretDB 1.x refuses TTL
indexes (``NotImplemented``), so the runtime deletes them every ``outbound.ledger_prune_interval_s`` instead, in a
thread of its own (``metalake.expiry.ExpiryJanitor``, which the webhook delivery log uses too).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from metalake.expiry import ExpiryJanitor
from processors.outbound.runtime.ledger import Ledger


class LedgerJanitor(ExpiryJanitor):
    """The ledger's janitor: logs ``outbound.ledger_expiry``/``_pruned``/``_prune_failed``, thread
    ``outbound-ledger-prune``."""

    def __init__(self, ledger: Ledger, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(ledger, interval_s, name="outbound.ledger", clock=clock)
