"""Publishing events from the admin API: routed to the tenant's topics, returned only once Kafka confirmed them.

One :class:`TenantPublisher` per app, made on first use (so an API that never publishes never connects to Kafka) and
kept on ``app.state``. Versions come from a clock that never goes backwards or repeats within the process, so two
changes a person makes to one asset in the same millisecond still apply in the order they were made.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, FastAPI, Request

from api.context import ApiContext, api_context
from api.problems import Problem
from api.settings import AdminApiSettings
from metalake.events import CloudEvent, spec_for
from metalake.kafka import Delivery, EventProducer, PublishError
from tenants.naming import CONTROL_DATABASE
from tenants.registry import TenantDirectory, TenantRegistry

# Serialises the first use only: two concurrent first requests must not each open a Kafka producer.
_CREATE_LOCK = threading.Lock()
RETRY_AFTER_S = 5
# A person waits on the answer: a publish Kafka does not confirm within this is reported as 503, not held for the
# producer's default 30 s.
PUBLISH_TIMEOUT_MS = 10_000


class VersionClock:
    """Milliseconds since the epoch, strictly increasing per instance (a tie or a clock step back adds 1)."""

    def __init__(self, now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000) -> None:
        self._now_ms = now_ms
        self._lock = threading.Lock()
        self._last = 0

    def next(self, at_least: int = 0) -> int:
        """The next version: now, but past every version issued before and at least ``at_least``."""
        with self._lock:
            self._last = max(self._now_ms(), self._last + 1, at_least)
            return self._last


class TenantPublisher:
    """Routes each event to its tenant's topic (priority or bulk by the type's rule) and waits for Kafka."""

    def __init__(
        self,
        settings: AdminApiSettings,
        directory: TenantDirectory,
        producer: EventProducer | None = None,
        clock: VersionClock | None = None,
    ) -> None:
        self._settings = settings
        self._directory = directory
        self._producer = producer or EventProducer(settings, **{"delivery.timeout.ms": PUBLISH_TIMEOUT_MS})
        self.clock = clock or VersionClock()

    @property
    def directory(self) -> TenantDirectory:
        """The tenants' topic names (a dead letter's replay routes by its events' topic class)."""
        return self._directory

    @property
    def producer(self) -> EventProducer:
        """The shared confirmed-delivery producer (also used to write connector offsets)."""
        return self._producer

    def topic_for(self, event: CloudEvent) -> str:
        return self._directory.names(event.tenantid).topic(spec_for(event.type).topic_class(event.data))

    def publish(self, event: CloudEvent, topic: str | None = None) -> Delivery:
        """Publish one event to its tenant's topic, or to ``topic`` (a request to one deployable); raise a 503
        problem (with Retry-After) when Kafka did not confirm it."""
        try:
            [delivery] = self._producer.publish([event], self.topic_for if topic is None else lambda _event: topic)
        except PublishError as exc:
            raise Problem(
                503,
                "unavailable",
                "the event was not confirmed by Kafka; nothing was changed, retry later"
                if exc.retriable
                else "the event was refused by Kafka",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            ) from None
        return delivery

    def close(self) -> None:
        self._producer.close()


def build_publisher(ctx: ApiContext) -> TenantPublisher:
    directory = TenantDirectory(TenantRegistry(ctx.mongo[CONTROL_DATABASE]), ctx.settings.lake_root)
    return TenantPublisher(ctx.settings, directory)


def event_publisher(request: Request) -> TenantPublisher:
    """The app's publisher, made on first use. Tests override this dependency or call :func:`close_publisher`."""
    state = request.app.state
    publisher = getattr(state, "event_publisher", None)
    if publisher is None:
        with _CREATE_LOCK:
            publisher = getattr(state, "event_publisher", None)
            if publisher is None:
                publisher = build_publisher(api_context(request))
                state.event_publisher = publisher
    assert isinstance(publisher, TenantPublisher)  # noqa: S101 - only this module sets it
    return publisher


def close_publisher(app: FastAPI) -> None:
    """Close the app's publisher if one was made (at shutdown)."""
    publisher = getattr(app.state, "event_publisher", None)
    if isinstance(publisher, TenantPublisher):
        publisher.close()
        app.state.event_publisher = None


PublisherDep = Annotated[TenantPublisher, Depends(event_publisher)]
