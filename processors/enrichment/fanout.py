"""A lake batch's commits run side by side: each table's commit is its own Delta transaction, so the batch waits for
the slowest one, not for their sum (issue 25).

``run_commits`` is plain threads: a commit starts once the commits it follows (``after``) returned, at most
``parallelism`` at a time; with 1 they run one after the other in the given order (the job before issue 25). Every
commit is waited for before the batch returns, and any failure fails the batch (the first one raised, the others
logged), so Spark records no offsets and the replay redoes the batch (every commit is idempotent). A commit whose
prerequisite failed does not start.

Spark's side: a MERGE takes its txnAppId/txnVersion from its session's SQL conf, so each table's MERGE runs in a
session of its own (``CommitSessions``: ``newSession``, the same SparkContext and cache, a conf of its own); appends
take theirs as writer options and share the batch's session. Each thread's jobs go to the batch thread's FAIR pool.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

POOL_PROPERTY = "spark.scheduler.pool"


@dataclass(frozen=True)
class Commit:
    """One commit of a batch: ``name`` is its step (timings, logs); it starts after the commits named in ``after``
    (names not in the batch are ignored: a batch without incidents has no incidents MERGE to wait for)."""

    name: str
    run: Callable[[], None]
    after: tuple[str, ...] = ()


def run_commits(commits: Sequence[Commit], parallelism: int, thread_setup: Callable[[], None] | None = None) -> None:
    """Run ``commits`` (each at most once, prerequisites first); raise the first failure once none is running."""
    names = [c.name for c in commits]
    if len(set(names)) != len(names):
        raise ValueError(f"commit names repeat: {names}")
    if parallelism <= 1:
        for commit in commits:  # in order: a commit's prerequisites are listed before it
            commit.run()
        return
    errors = _run_threads(commits, parallelism, thread_setup)
    if errors:
        for name, error in errors[1:]:
            log.error("enrichment.commit_failed", extra={"commit": name, "error": repr(error)})
        raise errors[0][1]


def _run_threads(
    commits: Sequence[Commit], parallelism: int, thread_setup: Callable[[], None] | None
) -> list[tuple[str, BaseException]]:
    present = {c.name for c in commits}
    waiting = {c.name: c for c in commits}
    done: set[str] = set()
    errors: list[tuple[str, BaseException]] = []
    running: dict[Future[None], str] = {}
    with ThreadPoolExecutor(max_workers=min(parallelism, len(commits)), thread_name_prefix="lake-commit") as pool:
        while waiting or running:
            failed = {name for name, _ in errors}
            for name, commit in list(waiting.items()):
                needs = set(commit.after) & present
                if needs & failed:
                    del waiting[name]  # never started: its prerequisite did not commit
                    failed.add(name)
                elif needs <= done:
                    del waiting[name]
                    running[pool.submit(_in_thread(commit.run, thread_setup))] = name
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                name = running.pop(future)
                error = future.exception()
                if error is None:
                    done.add(name)
                else:
                    errors.append((name, error))
    return errors


def _in_thread(run: Callable[[], None], thread_setup: Callable[[], None] | None) -> Callable[[], None]:
    # The caller's context (the batch's OpenTelemetry span) goes with the commit into its thread.
    context = contextvars.copy_context()

    def target() -> None:
        if thread_setup is not None:
            thread_setup()
        context.run(run)

    return target


def spark_thread_setup(spark: SparkSession) -> Callable[[], None]:
    """What a commit thread does first: put its Spark jobs in the batch thread's scheduler pool (a local property,
    which a Python thread's own JVM thread does not inherit)."""
    pool = spark.sparkContext.getLocalProperty(POOL_PROPERTY)

    def setup() -> None:
        if pool is not None:  # none: the default pool, as the batch's own jobs
            spark.sparkContext.setLocalProperty(POOL_PROPERTY, pool)

    return setup


class CommitSessions:
    """One Spark session per table MERGEd concurrently (made once, kept for the job's life): the MERGE's
    txnAppId/txnVersion confs are per session, and two MERGEs setting them in one session would swap ids. A new
    session starts from the SparkContext's conf (the job's builder settings), not from the batch session's runtime
    conf; the MERGE code sets the confs it needs before each attempt."""

    def __init__(self) -> None:
        self._sessions: dict[str, SparkSession] = {}

    def session(self, spark: SparkSession, table: str) -> SparkSession:
        held = self._sessions.get(table)
        if held is None or held.sparkContext is not spark.sparkContext:
            held = self._sessions[table] = spark.newSession()
        return held


__all__ = ["Commit", "CommitSessions", "run_commits", "spark_thread_setup"]
