"""One replay per dead letter: a document in ``metalake_control.dead_letter_replays`` keyed by tenant and letter id.

A replay first *claims* its letter with a conditional insert (the ``_id`` is unique): of two concurrent replays of
one letter exactly one inserts; the other reads what the first did. Only the claimant publishes, so a letter
replayed twice is published once. A replay that was refused (its cause is not fixed yet) may be tried again: the
claim then moves the document from ``refused`` back to ``running`` with a compare-and-set on its previous state. A
``running`` claim older than ``dead_letters.replay_claim_s`` (the replaying process died before it recorded the
outcome) may be claimed again; its events may then be published twice, which the events' own ids make harmless for
the connectors' deterministic ids (Monte Carlo incidents) and which the outbound ledger absorbs for deliveries.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NotRequired, TypedDict

from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from metalake.mongo import typed_collection

COLLECTION = "dead_letter_replays"
Status = Literal["running", "replayed", "refused"]


class ReplayDoc(TypedDict):
    _id: str
    tenant: str
    letter: str
    status: Status
    by: str
    claimed_at: datetime
    finished_at: NotRequired[datetime | None]
    reason: NotRequired[str | None]
    field: NotRequired[str | None]
    events: NotRequired[list[str]]
    tries: NotRequired[int]


@dataclass(frozen=True)
class Replay:
    """A letter's replay as recorded: its status, who asked last, and what it published or why it was refused."""

    letter: str
    status: Status
    by: str
    claimed_at: datetime
    finished_at: datetime | None = None
    reason: str | None = None
    field: str | None = None
    events: tuple[str, ...] = ()
    tries: int = 1


def _aware(value: datetime) -> datetime:
    # BSON dates come back naive (UTC) unless the client is tz-aware.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _replay(doc: ReplayDoc) -> Replay:
    finished = doc.get("finished_at")
    return Replay(
        letter=doc["letter"],
        status=doc["status"],
        by=doc["by"],
        claimed_at=_aware(doc["claimed_at"]),
        finished_at=_aware(finished) if finished is not None else None,
        reason=doc.get("reason"),
        field=doc.get("field"),
        events=tuple(doc.get("events") or ()),
        tries=doc.get("tries", 1),
    )


@dataclass(frozen=True)
class Claim:
    """``won``: this caller replays now; else ``existing`` is the replay that did (or is doing) it."""

    won: bool
    existing: Replay | None = None


class ReplayLog:
    def __init__(self, database: Database[Any], claim_s: float) -> None:
        self._docs: Collection[ReplayDoc] = typed_collection(database, COLLECTION, ReplayDoc)
        self._claim = timedelta(seconds=claim_s)

    @staticmethod
    def _id(tenant: str, letter: str) -> str:
        return f"{tenant}/{letter}"

    def get(self, tenant: str, letter: str) -> Replay | None:
        doc = self._docs.find_one({"_id": self._id(tenant, letter)})
        return _replay(doc) if doc is not None else None

    def claim(self, tenant: str, letter: str, by: str, now: datetime | None = None) -> Claim:
        """Claim the letter's replay for ``by`` (see the module docstring)."""
        now = now or datetime.now(UTC)
        key = self._id(tenant, letter)
        doc: ReplayDoc = {
            "_id": key,
            "tenant": tenant,
            "letter": letter,
            "status": "running",
            "by": by,
            "claimed_at": now,
            "tries": 1,
        }
        try:
            self._docs.insert_one(doc)
            return Claim(True)
        except DuplicateKeyError:
            pass
        found = self._docs.find_one({"_id": key})
        if found is None:  # removed in between (by hand): claim afresh
            return self.claim(tenant, letter, by, now)
        stale = found["status"] == "running" and _aware(found["claimed_at"]) < now - self._claim
        if found["status"] != "refused" and not stale:
            return Claim(False, _replay(found))
        # Compare-and-set on the state read: of two retries of a refused letter, one moves it.
        moved = self._docs.update_one(
            {"_id": key, "status": found["status"], "claimed_at": found["claimed_at"]},
            {
                "$set": {"status": "running", "by": by, "claimed_at": now, "tries": found.get("tries", 1) + 1},
                "$unset": {"reason": "", "field": "", "finished_at": ""},
            },
        )
        if moved.modified_count == 1:
            return Claim(True)
        again = self._docs.find_one({"_id": key})
        return Claim(False, _replay(again) if again is not None else None)

    def finish(
        self,
        tenant: str,
        letter: str,
        status: Literal["replayed", "refused"],
        *,
        events: list[str] | None = None,
        reason: str | None = None,
        field: str | None = None,
        now: datetime | None = None,
    ) -> Replay:
        """Record the outcome of the caller's claim."""
        key = self._id(tenant, letter)
        self._docs.update_one(
            {"_id": key},
            {
                "$set": {
                    "status": status,
                    "finished_at": now or datetime.now(UTC),
                    "events": list(events or []),
                    "reason": reason,
                    "field": field,
                }
            },
        )
        doc = self._docs.find_one({"_id": key})
        assert doc is not None  # noqa: S101 - claimed before, never deleted by the code
        return _replay(doc)

    def release(self, tenant: str, letter: str) -> None:
        """Drop a claim whose replay could not run at all (Kafka down): the next try claims afresh."""
        self._docs.delete_one({"_id": self._id(tenant, letter), "status": "running"})
