"""The streaming job's supervisor: a failed query restarts from its checkpoint; a persistent failure ends the job."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from processors.enrichment import main as stream
from processors.enrichment.main import MAX_RESTARTS, _Supervisor


@dataclass
class FakeQuery:
    name: str
    isActive: bool  # the attribute name of pyspark's StreamingQuery
    error: str | None = None

    def exception(self) -> str | None:
        return self.error


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "_backoff_s", lambda failures: 0.0)


def test_a_failed_query_is_restarted_and_the_other_keeps_running() -> None:
    starts: list[int] = []

    def start(i: int) -> FakeQuery:
        starts.append(i)
        first_of_zero = i == 0 and starts.count(0) == 1
        return FakeQuery(f"q{i}", isActive=not first_of_zero, error="Kafka away" if first_of_zero else None)

    supervisor = _Supervisor(start, 2, available_now=False)  # type: ignore[arg-type]
    runner = threading.Thread(target=supervisor.run)
    runner.start()
    try:
        deadline = threading.Event()
        deadline.wait(0.3)
    finally:
        supervisor.stopping.set()
        runner.join(timeout=10)
    assert not runner.is_alive()
    assert starts == [0, 1, 0]  # query 0 started again, query 1 untouched
    assert supervisor.queries[0].isActive


def test_a_query_failing_again_and_again_ends_the_job() -> None:
    starts: list[int] = []

    def start(i: int) -> FakeQuery:
        starts.append(i)
        return FakeQuery(f"q{i}", isActive=False, error="schema mismatch")

    supervisor = _Supervisor(start, 1, available_now=False)  # type: ignore[arg-type]
    runner = threading.Thread(target=supervisor.run)
    runner.start()
    runner.join(timeout=30)
    assert not runner.is_alive()
    assert len(starts) == MAX_RESTARTS + 1  # the first start and MAX_RESTARTS restarts, then it gives up


def test_available_now_ends_when_every_query_has_drained() -> None:
    supervisor = _Supervisor(lambda i: FakeQuery(f"q{i}", isActive=False), 2, available_now=True)  # type: ignore[arg-type, return-value]
    runner = threading.Thread(target=supervisor.run)
    runner.start()
    runner.join(timeout=10)
    assert not runner.is_alive()


def test_the_health_servers_liveness_names_the_queries_not_running() -> None:
    queries = [FakeQuery("lake", isActive=True), FakeQuery("mongo-bulk", isActive=True)]
    supervisor = _Supervisor(lambda i: queries[i], 2, available_now=False)  # type: ignore[arg-type,return-value]
    liveness = stream._liveness(supervisor)
    assert liveness() is None
    queries[1].isActive = False  # failed, not restarted yet
    assert liveness() == "queries not running: mongo-bulk"


def test_a_query_refused_by_kafka_names_the_setting(caplog: pytest.LogCaptureFixture) -> None:
    refused = (
        "org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed during authentication due "
        "to invalid credentials with SASL mechanism SCRAM-SHA-512"
    )
    supervisor = _Supervisor(lambda i: FakeQuery(f"q{i}", isActive=False, error=refused), 1, available_now=False)  # type: ignore[arg-type,return-value]
    supervisor.stopping.set()  # no restart: only the log line
    with caplog.at_level("WARNING", logger="processors.enrichment.main"):
        supervisor._restart(0, refused)
    (record,) = [r for r in caplog.records if r.getMessage() == "stream.query_restarting"]
    assert record.__dict__["setting"] == "kafka.sasl_password"
