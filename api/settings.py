"""The admin API's own sections: SQL and share links (``METALAKE_SQL__*``), dead letters
(``METALAKE_DEAD_LETTERS__*``)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from catalog.propagation.settings import PropagationLimits
from control.auth.settings import AuthSettings, EnforcementSettings
from control.connectors.settings import ConnectorControlSettings
from control.settings import ErasureSettings
from control.snowflake.settings import MaskingSettings
from control.subscriptions.settings import OutboundSettings


class SqlSettings(BaseModel):
    """The SQL endpoint and share links of the admin API: every query stops at ``max_rows`` rows or ``timeout_s``."""

    max_rows: int = Field(default=10_000, gt=0)
    timeout_s: float = Field(default=30.0, gt=0)
    share_default_ttl_s: int = Field(default=86_400, gt=0)
    share_max_ttl_s: int = Field(default=30 * 86_400, gt=0)
    # Trino calls (SQL and share links) run on their own pool of this many threads, not on the pool every route
    # shares; a tenant holds at most max_concurrent_per_tenant of them (over it: 429 at once, never queued).
    workers: int = Field(default=16, gt=0, le=1000)
    max_concurrent_per_tenant: int = Field(default=4, gt=0)
    # Share link reads (public: no token): per link, and per peer address across links (token buckets, per process).
    share_rate_per_s: float = Field(default=1.0, gt=0)
    share_burst: int = Field(default=10, gt=0)
    share_peer_rate_per_s: float = Field(default=5.0, gt=0)
    share_peer_burst: int = Field(default=30, gt=0)


class DeadLetterSettings(BaseModel):
    """Listing, inspecting and replaying dead letters through the admin API (``control.deadletters``).

    A listing reads the shared DLQ topics from their newest records back: at most ``scan_max_records`` per topic and
    request (older letters are left out, and the answer says so), so one tenant's listing costs a bounded read
    whatever the topics hold. A letter's payload is shown up to ``payload_max_bytes`` (bigger: its size and hash
    only). A replay that started and did not finish within ``replay_claim_s`` (the API died) may be claimed again.
    """

    scan_max_records: int = Field(default=20_000, gt=0, le=1_000_000)
    payload_max_bytes: int = Field(default=16_384, gt=0, le=1_048_576)
    replay_claim_s: float = Field(default=120.0, gt=0)
    # How long a read of the DLQ topics may take before the listing answers 503 (Kafka slow or down).
    read_timeout_s: float = Field(default=10.0, gt=0)


class AdminApiSettings(AuthSettings, MaskingSettings, ConnectorControlSettings):
    """What the admin API (``metalake api``) reads: its own sections and those of the control-plane code it serves."""

    sql: SqlSettings = SqlSettings()
    dead_letters: DeadLetterSettings = DeadLetterSettings()
    enforcement: EnforcementSettings = EnforcementSettings()
    erasure: ErasureSettings = ErasureSettings()
    outbound: OutboundSettings = OutboundSettings()
    propagation: PropagationLimits = PropagationLimits()
