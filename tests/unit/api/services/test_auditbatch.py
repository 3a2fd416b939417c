"""Audit rows are committed in batches (one Delta commit per table per interval or batch size), a failed commit keeps
its rows, and the app's clean shutdown commits every row still waiting."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.services import audit
from api.services.auditbatch import AuditBatcher
from control.audit import AuditRow, audit_row
from control.auth.principal import Principal
from control.auth.settings import ApiSettings
from ops.settings import Settings
from tests._support.api_app import build_app


class _Commits:
    def __init__(self) -> None:
        self.done: list[tuple[str, int]] = []
        self.fail = 0
        self.lock = threading.Lock()

    def __call__(self, path: Any, rows: Sequence[AuditRow], storage: Any = None) -> None:
        with self.lock:
            if self.fail:
                self.fail -= 1
                raise OSError("lake unreachable")
            self.done.append((str(path), len(rows)))


def _until(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def _row(i: int) -> AuditRow:
    return audit_row("c1", "client.create", f"mlc_{i}", "done")


def test_rows_of_one_table_share_one_commit_per_interval() -> None:
    commits = _Commits()
    batcher = AuditBatcher(None, interval_s=0.2, max_rows=1000, max_buffered=10_000, commit=commits)
    a, b = Path("/lake/acme/audit"), Path("/lake/globex/audit")
    for i in range(50):
        assert batcher.add(a if i % 2 else b, _row(i))
    assert commits.done == []  # nothing committed by the requests themselves
    _until(lambda: len(commits.done) == 2)
    assert sorted(commits.done) == [(str(a), 25), (str(b), 25)]
    batcher.close()


def test_a_full_batch_is_committed_at_once() -> None:
    commits = _Commits()
    batcher = AuditBatcher(None, interval_s=60, max_rows=3, max_buffered=10_000, commit=commits)
    for i in range(3):
        batcher.add(Path("/lake/acme/audit"), _row(i))
    _until(lambda: commits.done == [("/lake/acme/audit", 3)])
    batcher.close()


def test_a_failed_commit_keeps_its_rows_and_a_full_buffer_commits_in_the_request() -> None:
    commits = _Commits()
    commits.fail = 1
    batcher = AuditBatcher(None, interval_s=60, max_rows=1000, max_buffered=2, commit=commits)
    path = Path("/lake/acme/audit")
    assert batcher.add(path, _row(1)) and batcher.add(path, _row(2))
    assert not batcher.add(path, _row(3))  # the caller commits this one itself: memory stays bounded
    with pytest.raises(OSError):
        batcher.flush()
    batcher.flush(path)
    assert commits.done == [(str(path), 2)]
    batcher.close()
    assert not batcher.add(path, _row(4))  # closed: the caller commits


def test_a_clean_shutdown_commits_every_buffered_row(monkeypatch: pytest.MonkeyPatch) -> None:
    commits = _Commits()
    monkeypatch.setattr("control.audit.append", commits)
    app, _ = build_app(Settings(api=ApiSettings(resume=False, audit_flush_s=30)))
    admin = Principal(subject="cli", tenant=None, scopes=frozenset({"platform:admin"}))
    with TestClient(app):
        for i in range(5):
            audit.record_platform(app.state.ctx, admin, "signing_key.rotate", f"k{i}", audit.DONE)
        assert commits.done == []  # buffered: one commit later, not five now
    assert [n for _, n in commits.done] == [5]


def test_batched_rows_land_in_one_delta_commit(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    from control.audit import AuditQuery, ensure_table, read

    table = tmp_path / "acme" / "audit"
    ensure_table(table)
    before = DeltaTable(str(table)).version()
    batcher = AuditBatcher(None, interval_s=60, max_rows=1000, max_buffered=10_000)
    for i in range(20):
        batcher.add(table, _row(i))
    batcher.close()
    assert DeltaTable(str(table)).version() == before + 1
    assert len(read(table, AuditQuery(limit=100))) == 20
