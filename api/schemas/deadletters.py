"""Dead letter bodies: a letter as listed (its context), as inspected (plus its record, redacted) and a replay."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from api.schemas.common import Page
from api.services.dead_letters.letters import StoredLetter
from api.services.dead_letters.replay import Replay
from api.services.dead_letters.service import Listed, Replayed
from api.services.dead_letters.view import key_text, payload_view, shown_headers


class ReplayView(BaseModel):
    """A letter's replay as recorded (one per letter; a refused one may be tried again)."""

    status: Literal["running", "replayed", "refused"]
    by: str = Field(description="The client that asked (its subject).")
    claimed_at: datetime
    finished_at: datetime | None = None
    reason: str | None = Field(default=None, description="Why it was refused (names fields, never values).")
    field: str | None = Field(default=None, description="The field at fault when refused.")
    events: list[str] = Field(default_factory=list, description="The ids of the events or records it published.")
    tries: int = 1

    @classmethod
    def of(cls, replay: Replay) -> ReplayView:
        return cls(
            status=replay.status,
            by=replay.by,
            claimed_at=replay.claimed_at,
            finished_at=replay.finished_at,
            reason=replay.reason,
            field=replay.field,
            events=list(replay.events),
            tries=replay.tries,
        )


class DeadLetterSummary(BaseModel):
    """Why a record was dead-lettered and where it came from; never payload values."""

    id: str = Field(
        description="`<medium>-<partition>-<offset>` (`connectors-0-42`), or `stream-<priority|bulk>-<partition>-"
        "<offset>` for a streaming job's `_dlq` row (the record's place in its event topic); stable while kept."
    )
    medium: Literal["connectors", "outbound", "stream"] = Field(
        description="Where the letter is: the connector worker's or outbound's DLQ topic, or the job's `_dlq` table."
    )
    stage: str = Field(description="`mapping`, `transform` (connector worker), `outbound` or `stream`.")
    error_class: str
    reason: str
    field: str | None = Field(default=None, description="Where in the record the fault is, when known.")
    time: datetime = Field(description="When the record was dead-lettered.")
    attempts: int
    plugin: str | None = Field(default=None, description="The connector type or the destination.")
    connector: str | None = None
    origin: str | None = Field(default=None, description="`webhook:<path>` or `source:<tenant>/<connector>/<key>`.")
    subscription: str | None = None
    origin_topic: str | None = None
    origin_partition: int | None = None
    origin_offset: int | None = None
    replay: ReplayView | None = None

    @staticmethod
    def fields_of(stored: StoredLetter, replay: Replay | None) -> dict[str, Any]:
        letter = stored.letter
        return {
            "id": stored.id,
            "medium": stored.medium,
            "stage": letter.stage,
            "error_class": letter.error_class,
            "reason": letter.reason,
            "field": letter.field,
            "time": stored.time,
            "attempts": letter.attempts,
            "plugin": letter.plugin,
            "connector": letter.connector,
            "origin": letter.origin,
            "subscription": letter.subscription,
            "origin_topic": letter.origin_topic,
            "origin_partition": letter.origin_partition,
            "origin_offset": letter.origin_offset,
            "replay": ReplayView.of(replay) if replay is not None else None,
        }


class PayloadView(BaseModel):
    shown: bool = Field(description="False for a body that is not JSON or too large: only its size and hash.")
    size: int
    sha256: str | None = None
    value: Any = Field(default=None, description="The parsed JSON, secret keys and credential-like strings redacted.")
    note: str | None = None


class DeadLetterView(DeadLetterSummary):
    """A letter inspected: its context, the original record's key and allow-listed headers, its payload redacted."""

    key: str | None = None
    headers: dict[str, str] = Field(description="`content-type` and the CloudEvents `ce_` attributes only.")
    headers_hidden: int = Field(description="How many other headers the record had (not shown).")
    payload: PayloadView

    @classmethod
    def of(cls, stored: StoredLetter, replay: Replay | None, payload_max_bytes: int) -> DeadLetterView:
        headers, hidden = shown_headers(stored.original_headers)
        payload = payload_view(stored.value, payload_max_bytes)
        shown = PayloadView(
            shown=payload.shown, size=payload.size, sha256=payload.sha256, value=payload.value, note=payload.note
        )
        return cls.model_validate(
            {
                **DeadLetterSummary.fields_of(stored, replay),
                "key": key_text(stored.key),
                "headers": headers,
                "headers_hidden": hidden,
                "payload": shown,
            }
        )


class DeadLetterPage(Page[DeadLetterSummary]):
    truncated: bool = Field(
        default=False,
        description="True when older letters were not read (over `dead_letters.scan_max_records` per topic).",
    )

    @classmethod
    def of(cls, listed: Listed, next_cursor: str | None) -> DeadLetterPage:
        items = [DeadLetterSummary.model_validate(DeadLetterSummary.fields_of(s, r)) for s, r in listed.letters]
        return cls(items=items, next_cursor=next_cursor, truncated=listed.truncated)


class ReplayResult(BaseModel):
    """The outcome of one replay request: `replayed` now, or `already_replayed` (nothing published again)."""

    letter: str
    outcome: Literal["replayed", "already_replayed", "in_progress"]
    published: int = Field(description="Records published by this request (0 unless `replayed`).")
    dropped: int = Field(default=0, description="Events the connector's current transforms dropped.")
    replay: ReplayView

    @classmethod
    def of(cls, replayed: Replayed) -> ReplayResult:
        return cls(
            letter=replayed.letter,
            outcome=replayed.outcome,
            published=replayed.published,
            dropped=replayed.dropped,
            replay=ReplayView.of(replayed.replay),
        )
