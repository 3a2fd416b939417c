"""The status rule the admin API shows: a task's state as its connector's state makes it look."""

from __future__ import annotations

from control.connectors.records import ConnectorRecord, ConnectorState, TaskRecord


def task_state(record: ConnectorRecord, task: TaskRecord) -> ConnectorState:
    """A task's state as shown: like Connect, pausing a connector pauses its tasks, and a FAILED task stays FAILED
    until it is restarted."""
    if record.state is ConnectorState.PAUSED and task.state is not ConnectorState.FAILED:
        return ConnectorState.PAUSED
    return task.state
