"""A source connector's tasks, Kafka Connect's way: checking the split and handing each task its own offsets.

The connector proposes the split (:meth:`~control.connectors.plugin.SourceConnector.task_configs`); the runtime
checks it and gives each task the stored offsets of the partitions it owns, and those only. Ownership must be
disjoint: a partition two tasks claim is refused, because both would publish it and each could delete what the other
emits.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from control.connectors.plugin import InvalidPartitionKey, SourceConnector, parse_partition_key

Offsets = Mapping[str, Mapping[str, Any]]


class InvalidTaskConfigs(ValueError):
    """The connector's split is unusable: none, more than ``tasks.max``, not JSON, or overlapping."""


def worker_id() -> str:
    """Who runs a task: ``<host>:<pid>`` (crawls run in the worker or in a ``metalake connect crawl`` process)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def check_configs(configs: object, max_tasks: int) -> list[dict[str, Any]]:
    """The connector's task configurations, if there are 1 to ``max_tasks`` JSON objects (they are stored as is)."""
    if not isinstance(configs, list) or not 1 <= len(configs) <= max_tasks:
        count = len(configs) if isinstance(configs, list) else type(configs).__name__
        raise InvalidTaskConfigs(f"task_configs returned {count} task configuration(s); expected 1 to {max_tasks}")
    out: list[dict[str, Any]] = []
    for i, config in enumerate(configs):
        if not isinstance(config, dict):
            raise InvalidTaskConfigs(f"task configuration {i} is a {type(config).__name__}, not an object")
        try:
            out.append(json.loads(json.dumps(config)))
        except (TypeError, ValueError) as exc:
            raise InvalidTaskConfigs(f"task configuration {i} is not JSON: {type(exc).__name__}") from None
    return out


def owned_offsets(
    stored: Offsets, tasks: Sequence[SourceConnector[Any]]
) -> tuple[list[dict[str, Mapping[str, Any]]], int]:
    """Per task, the stored offsets of the partitions it owns; and how many stored partitions no task owns.

    An unowned partition is left alone this run (no task sees it, so none can delete it). Raises
    :class:`InvalidTaskConfigs` if two tasks own one partition.
    """
    per_task: list[dict[str, Mapping[str, Any]]] = [{} for _ in tasks]
    unowned = 0
    for key, offset in stored.items():
        try:
            partition = parse_partition_key(key)
        except InvalidPartitionKey:
            unowned += 1
            continue
        owners = [i for i, task in enumerate(tasks) if task.owns(partition)]
        if len(owners) > 1:
            raise InvalidTaskConfigs(f"tasks {owners} own the same stored partition: the split must be disjoint")
        if owners:
            per_task[owners[0]][key] = offset
        else:
            unowned += 1
    return per_task, unowned
