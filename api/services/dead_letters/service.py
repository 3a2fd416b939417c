"""A tenant's dead letters for the admin API: listing with filters and pages, inspection, and replay.

Reads go to the DLQ topics (:class:`api.services.dead_letters.letters.DeadLetterTopics`), filtered on the tenant:
another tenant's letter answers 404 like a missing one. A replay claims the letter in the replay log, runs it
through the stage that refused it with the current configuration (:mod:`api.services.dead_letters.replay`), publishes
what that gives (confirmed by Kafka) and records the outcome; the route audits every request. What is shown of a
letter is :mod:`api.services.dead_letters.view`'s decision.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from api.problems import Problem
from api.services.dead_letters.letters import (
    MEDIA,
    DeadLettersUnavailable,
    DeadLetterTopics,
    Medium,
    Scan,
    StoredLetter,
    StreamDeadLetters,
    TopicMedium,
    parse_letter_id,
    parse_stream_letter_id,
)
from api.services.dead_letters.replay import Refused, Replay, ReplayLog, outbound_record, remap, stream_record
from api.services.dead_letters.scope import LetterScope, everything
from api.services.events import RETRY_AFTER_S, TenantPublisher
from api.settings import AdminApiSettings
from control.connectors.registry import Plugin
from control.connectors.store import ControlStore
from control.subscriptions.store import SubscriptionStore
from metalake.kafka import PublishError, RawRecord
from metalake.telemetry import inject_traceparent
from tenants.naming import TenantNames

log = logging.getLogger(__name__)

Stage = Literal["connectors", "mapping", "transform", "outbound", "stream"]

_STAGES: dict[str, tuple[Medium, frozenset[str] | None]] = {
    "connectors": ("connectors", None),
    "mapping": ("connectors", frozenset({"mapping"})),
    "transform": ("connectors", frozenset({"transform"})),
    "outbound": ("outbound", None),
    "stream": ("stream", None),
}


@dataclass(frozen=True)
class Filters:
    stage: Stage | None = None
    connector: str | None = None
    error_class: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def media(self) -> tuple[Medium, ...]:
        return (*MEDIA, "stream") if self.stage is None else (_STAGES[self.stage][0],)

    def admits(self, stored: StoredLetter) -> bool:
        letter = stored.letter
        stages = _STAGES[self.stage][1] if self.stage is not None else None
        return (
            (stages is None or letter.stage in stages)
            and (self.connector is None or letter.connector == self.connector)
            and (self.error_class is None or letter.error_class == self.error_class)
            and (self.since is None or stored.time >= self.since)
            and (self.until is None or stored.time < self.until)
        )


def _unavailable(detail: str) -> Problem:
    return Problem(503, "unavailable", detail, headers={"Retry-After": str(RETRY_AFTER_S)})


def sort_key(stored: StoredLetter) -> tuple[str, str]:
    """Listings sort on this, newest first; a cursor is this key of a page's last letter (fixed-width UTC times sort
    as text)."""
    return stored.time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f"), stored.id


@dataclass(frozen=True)
class Listed:
    """A page of letters with their replays, whether older ones were not read, and where the next page starts."""

    letters: list[tuple[StoredLetter, Replay | None]]
    truncated: bool
    resume: tuple[str, str] | None


@dataclass(frozen=True)
class Replayed:
    """One replay request's outcome; ``replay`` is the log's record (this request's or an earlier one's)."""

    letter: str
    outcome: Literal["replayed", "already_replayed", "in_progress"]
    published: int
    dropped: int
    replay: Replay


class DeadLetters:
    def __init__(  # noqa: PLR0913
        self,
        settings: AdminApiSettings,
        topics: DeadLetterTopics,
        replays: ReplayLog,
        connectors: ControlStore,
        subscriptions: SubscriptionStore,
        plugins: Mapping[str, Plugin],
        names: Callable[[str], TenantNames],
        scope: Callable[[str], LetterScope] = everything,
    ) -> None:
        self.settings = settings
        self._names = names
        # Which letters of the tenant's id are its own now (its registration's, none naming an erased asset).
        self._scope = scope
        self._topics, self._replays = topics, replays
        self._connectors, self._subscriptions, self._plugins = connectors, subscriptions, plugins

    def page(self, tenant: str, filters: Filters, limit: int, after: tuple[str, str] | None) -> Listed:
        """A page of the tenant's letters, newest first."""
        media = filters.media()
        topic_media: list[TopicMedium] = [m for m in MEDIA if m in media]
        try:
            scan = self._topics.scan(tenant, topic_media) if topic_media else Scan([], False)
        except DeadLettersUnavailable as exc:
            log.warning("api.dead_letters_unavailable", extra={"tenant": tenant, "error": str(exc)})
            raise _unavailable("the dead-letter topics cannot be read now; retry later") from None
        if "stream" in media:
            stream = StreamDeadLetters(self.settings, self._names(tenant)).scan()
            scan = Scan(scan.letters + stream.letters, scan.truncated or stream.truncated)
        scope = self._scope(tenant)
        matching = sorted(
            (
                s
                for s in scan.letters
                if filters.admits(s) and (after is None or sort_key(s) < after) and scope.admits(s)
            ),
            key=sort_key,
            reverse=True,
        )
        page = matching[:limit]
        resume = sort_key(page[-1]) if len(matching) > limit and page else None
        return Listed([(s, self._replays.get(tenant, s.id)) for s in page], scan.truncated, resume)

    def stored(self, tenant: str, letter_id: str) -> StoredLetter:
        """The tenant's letter, or a 404 problem: another tenant's, an older registration's, or one naming an erased
        asset are not found either."""
        stored = self._found(tenant, letter_id)
        if not self._scope(tenant).admits(stored):
            raise Problem(404, "not-found", "no such dead letter", field="letter_id")
        return stored

    def _found(self, tenant: str, letter_id: str) -> StoredLetter:
        in_stream = parse_stream_letter_id(letter_id)
        if in_stream is not None:
            found = StreamDeadLetters(self.settings, self._names(tenant)).get(*in_stream)
            if found is None:
                raise Problem(404, "not-found", "no such dead letter", field="letter_id")
            return found
        parsed = parse_letter_id(letter_id)
        if parsed is None:
            raise Problem(404, "not-found", "no such dead letter", field="letter_id")
        try:
            stored = self._topics.get(tenant, *parsed)
        except DeadLettersUnavailable as exc:
            log.warning("api.dead_letters_unavailable", extra={"tenant": tenant, "error": str(exc)})
            raise _unavailable("the dead-letter topics cannot be read now; retry later") from None
        if stored is None:
            raise Problem(404, "not-found", "no such dead letter", field="letter_id")
        return stored

    def inspect(self, tenant: str, letter_id: str) -> tuple[StoredLetter, Replay | None]:
        stored = self.stored(tenant, letter_id)
        return stored, self._replays.get(tenant, stored.id)

    def _records(self, tenant: str, stored: StoredLetter, publisher: TenantPublisher) -> tuple[list[RawRecord], int]:
        if stored.medium == "outbound":
            return [outbound_record(stored, self._subscriptions)], 0
        if stored.medium == "stream":
            return [stream_record(stored, self._names(tenant))], 0
        remapped = remap(stored, self._connectors, self._plugins)
        names = publisher.directory.names(tenant)
        records = [
            RawRecord(
                names.topic(r.topic_class),
                r.event.id,
                r.event.key,
                r.event.value(),
                inject_traceparent(r.event.headers()),
            )
            for r in remapped.routed
        ]
        return records, remapped.dropped

    def _replayable(self, tenant: str, stored: StoredLetter, publisher: TenantPublisher) -> tuple[list[RawRecord], int]:
        records, dropped = self._records(tenant, stored, publisher)
        if self._scope(tenant).names_erased(records):
            # Publishing it would bring an erased asset back (a connector letter maps to the URN only now).
            raise Refused("the replay would publish an asset the tenant erased: it is not replayed", "letter_id")
        return records, dropped

    def replay(self, tenant: str, letter_id: str, by: str, publisher: TenantPublisher) -> Replayed:
        """Replay the letter once (see the module docstring). Raises :class:`Refused` (recorded) when it cannot be
        replayed now, a 503 problem when Kafka did not confirm (nothing recorded: try again)."""
        stored = self.stored(tenant, letter_id)
        claim = self._replays.claim(tenant, stored.id, by)
        if not claim.won:
            existing = claim.existing
            if existing is None:  # lost a race to a claim that vanished since: report it as running
                raise _unavailable("another replay of this letter is under way; retry later")
            if existing.status == "replayed":
                return Replayed(stored.id, "already_replayed", 0, 0, existing)
            return Replayed(stored.id, "in_progress", 0, 0, existing)
        try:
            records, dropped = self._replayable(tenant, stored, publisher)
        except Refused as exc:
            self._replays.finish(tenant, stored.id, "refused", reason=exc.reason, field=exc.field)
            raise
        except Exception:
            self._replays.release(tenant, stored.id)
            raise
        try:
            if records:
                publisher.producer.publish_raw(records)
        except PublishError:
            self._replays.release(tenant, stored.id)
            raise _unavailable(
                "Kafka did not confirm the replayed records; nothing was recorded, retry later"
            ) from None
        done = self._replays.finish(tenant, stored.id, "replayed", events=[r.id for r in records])
        log.info(
            "api.dead_letter_replayed",
            extra={"tenant": tenant, "letter": stored.id, "published": len(records), "dropped": dropped},
        )
        return Replayed(stored.id, "replayed", len(records), dropped, done)
