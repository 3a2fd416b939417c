"""The outbound runtime's section (``METALAKE_OUTBOUND__*``), read by the runtime and by the admin API (test sends,
dead-letter replays)."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator


class OutboundSettings(BaseModel):
    """The outbound runtime (``metalake outbound run``): the destinations (Slack, Jira, Teams, Freshdesk, webhooks) fed
    by ``metalake.changes``.

    Short retries happen in the process (exponential backoff, Retry-After honoured up to ``retry_after_max_s``);
    what still fails goes to the retry topic with a due time, and after ``retry_topic_max_attempts`` to the DLQ.
    ``ssrf_allow`` lists networks (CIDR) a destination may resolve to although the SSRF guard refuses them (tests
    allow ``127.0.0.0/8``). ``allow_base_url_override`` lets a subscription point Slack/Jira at another base URL.
    ``ledger_retention_s`` bounds the delivery ledger (docs/outbound.md, "Ledger retention").
    """

    group_id: str = "metalake-outbound"
    retry_group_id: str = "metalake-outbound-retry"
    # How soon Kafka hands a dead runtime's partitions to its successor (librdkafka's session.timeout.ms).
    session_timeout_ms: int = Field(default=45_000, ge=6_000)
    batch_size: int = Field(default=100, gt=0)
    poll_timeout_s: float = Field(default=0.5, gt=0)
    # Records of a batch with different keys (assets) are delivered in parallel; one key's stay in order.
    workers: int = Field(default=8, ge=1)
    subscriptions_ttl_s: float = Field(default=10.0, ge=0)
    short_attempts: int = Field(default=3, ge=1)
    backoff_initial_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=5.0, ge=0)
    retry_after_max_s: float = Field(default=10.0, ge=0)
    retry_initial_s: float = Field(default=5.0, ge=0)
    retry_max_s: float = Field(default=300.0, ge=0)
    retry_topic_max_attempts: int = Field(default=12, ge=1)
    http_timeout_s: float = Field(default=10.0, gt=0)
    # Wall-clock bound of one delivery (all its requests and short retries): a receiver trickling its answer is cut
    # here and the change goes to the retry topic, so the batch (other tenants' changes) is not held (docs/outbound.md).
    delivery_deadline_s: float = Field(default=30.0, gt=0)
    slack_base_url: str = "https://slack.com/api/"
    allow_base_url_override: bool = False
    ssrf_allow: list[str] = Field(default_factory=list)
    # How long a delivery-ledger step outlives its last write (and an anchor the delivered removal of its tag): it
    # must cover every redelivery of a change (the retry topic's window, a consumer group replaying after a restart).
    ledger_retention_s: float = Field(default=7 * 86_400, gt=0)
    # Where the server has no TTL indexes (FerretDB 1.x), the runtime deletes expired ledger documents this often.
    ledger_prune_interval_s: float = Field(default=3_600, gt=0)
    # A subscription's test send not picked up within this (the runtime was down) is reported failed, not sent late.
    test_expiry_s: float = Field(default=300.0, gt=0)
    # How far the downstream impact of a Monte Carlo incident is walked for messages and webhook bodies (lineage
    # levels, and assets listed at most): one projection query per level, per incident delivered.
    impact_max_depth: int = Field(default=5, ge=0, le=50)
    impact_max_assets: int = Field(default=100, ge=0, le=10_000)

    @model_validator(mode="after")
    def _retention_covers_retries(self) -> OutboundSettings:
        window = self.retry_max_s * self.retry_topic_max_attempts
        if self.ledger_retention_s < window:
            raise ValueError(
                f"ledger_retention_s ({self.ledger_retention_s:g}) is shorter than the retry topic's window "
                f"(retry_max_s x retry_topic_max_attempts = {window:g} s): a retried change could post twice"
            )
        return self
