"""The Kafka ACLs each metalake process needs, derived from what its code reads, writes, creates and joins.

A pure function of the settings (:func:`required_acls`): the principal of each process kind (``kafka.principals``), the
consumer groups of the processors, and the topic names of ``tenants.naming``. Rendered by ``metalake kafka acls`` (and
applied with ``--apply``) and in docs/production.md. Here and not in the kernel: the topic names live in ``tenants`` and
the readers' groups in ``control``, which the kernel cannot import.

Dedicated tenants' topics share :data:`tenants.naming.DEDICATED_TOPIC_PREFIX`, so every grant on them is PREFIXED: a new
tenant needs no new ACL, and the lake worker's CREATE and DELETE on the prefix let provisioning (which it runs,
``processors.lake.provisioning``) create and delete those topics and no other. The platform's topics (pooled event
topics, changes, DLQs, retry, tests, offsets) are created at install by the cluster's administrator: no process may
create or reconfigure them. Every producer is idempotent (``enable.idempotence``), hence IDEMPOTENT_WRITE on the cluster
(implied by WRITE since Kafka 3.0, granted for older brokers); no producer is transactional, so no TRANSACTIONAL_ID is
granted. READ and WRITE imply DESCRIBE (the metadata the clients ask for); the readiness check's metadata request needs
no ACL. Consumer groups: READ for the processors' own (they join and commit); DESCRIBE for metalake's readers that
assign partitions and never commit (librdkafka looks their coordinator up all the same); none for the streaming job,
whose Spark source (Java client) assigns partitions, fetches offsets with its admin client and keeps them in its
checkpoint. Each of these was checked on a broker with an authorizer (tests/integration/test_kafka_acls.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from api.services.dead_letters.letters import READER_GROUP as DEAD_LETTERS_GROUP
from control.connectors.offsets import READER_GROUP_PREFIX as OFFSETS_READER_PREFIX
from metalake.kafka.config import client_config
from ops.settings import Settings
from tenants.naming import (
    BULK_TOPIC,
    CHANGES_TOPIC,
    CONNECT_OFFSETS_TOPIC,
    DEDICATED_TOPIC_PREFIX,
    OUTBOUND_TESTS_TOPIC,
    PRIORITY_TOPIC,
    dlq_topic,
    retry_topic,
)

Process = Literal["api", "connect", "stream", "propagation", "outbound", "access", "lake"]
Resource = Literal["TOPIC", "GROUP", "CLUSTER"]
PatternType = Literal["LITERAL", "PREFIXED"]
Operation = Literal["READ", "WRITE", "CREATE", "DELETE", "DESCRIBE", "IDEMPOTENT_WRITE"]

PROCESSES: tuple[Process, ...] = ("api", "connect", "stream", "propagation", "outbound", "access", "lake")
# What each principal setting stands for (the command's and the docs' wording).
PROCESS_NAMES: dict[Process, str] = {
    "api": "admin API (events, replays, subscription tests, dead letters, offsets)",
    "connect": "connector worker (webhooks, ingest, crawls)",
    "stream": "streaming job (Spark; pooled and dedicated)",
    "propagation": "propagation processor",
    "outbound": "outbound runtime",
    "access": "access processor",
    "lake": "lake worker and lake commands (erase, tenant provisioning)",
}
CLUSTER = "kafka-cluster"  # the one name Kafka gives the CLUSTER resource


@dataclass(frozen=True, order=True)
class Acl:
    """One ALLOW binding, from any host."""

    principal: str  # with its type: "User:<name>"
    resource_type: Resource
    pattern: PatternType
    name: str
    operation: Operation
    process: Process
    why: str


@dataclass(frozen=True)
class _Grant:
    resource_type: Resource
    pattern: PatternType
    name: str
    operations: tuple[Operation, ...]
    why: str


def _topic(name: str, *ops: Operation, why: str) -> _Grant:
    return _Grant("TOPIC", "LITERAL", name, ops, why)


def _dedicated(*ops: Operation, why: str) -> _Grant:
    return _Grant("TOPIC", "PREFIXED", DEDICATED_TOPIC_PREFIX, ops, why)


def _group(name: str, why: str, *, prefixed: bool = False, operation: Operation = "READ") -> _Grant:
    return _Grant("GROUP", "PREFIXED" if prefixed else "LITERAL", name, (operation,), why)


_IDEMPOTENT = _Grant("CLUSTER", "LITERAL", CLUSTER, ("IDEMPOTENT_WRITE",), "idempotent producers")


def _grants(settings: Settings) -> dict[Process, list[_Grant]]:
    connectors_dlq, outbound_dlq = dlq_topic("connectors"), dlq_topic("outbound")
    outbound_retry = retry_topic("outbound")
    events = "events of tenants (priority and bulk)"
    # Readers that assign partitions and never commit: librdkafka still looks up their group's coordinator (and the
    # dead-letter listing fails on GROUP_AUTHORIZATION_FAILED), which takes DESCRIBE, not READ.
    offsets_reader = _group(
        OFFSETS_READER_PREFIX, "reading the offsets topic (a throwaway group each)", prefixed=True, operation="DESCRIBE"
    )
    return {
        "api": [
            _topic(PRIORITY_TOPIC, "WRITE", why=f"{events}; dead-letter replays"),
            _topic(BULK_TOPIC, "WRITE", why=f"{events}; dead-letter replays"),
            _dedicated("WRITE", why=f"{events}; dead-letter replays"),
            _topic(OUTBOUND_TESTS_TOPIC, "WRITE", why="subscription test sends"),
            _topic(outbound_retry, "WRITE", why="replays of outbound dead letters"),
            _topic(connectors_dlq, "READ", why="dead-letter listings"),
            _topic(outbound_dlq, "READ", why="dead-letter listings"),
            _group(DEAD_LETTERS_GROUP, "dead-letter listings", operation="DESCRIBE"),
            _topic(
                CONNECT_OFFSETS_TOPIC, "READ", "WRITE", why="connectors' offsets: read, reset, a tenant's forgotten"
            ),
            offsets_reader,
            _IDEMPOTENT,
        ],
        "connect": [
            _topic(PRIORITY_TOPIC, "WRITE", why=events),
            _topic(BULK_TOPIC, "WRITE", why=events),
            _dedicated("WRITE", why=events),
            _topic(connectors_dlq, "WRITE", why="dead letters of webhooks and crawls"),
            _topic(CONNECT_OFFSETS_TOPIC, "READ", "WRITE", why="source offsets of pull connectors"),
            offsets_reader,
            _IDEMPOTENT,
        ],
        "stream": [
            _topic(PRIORITY_TOPIC, "READ", "WRITE", why="its source; tag events it derives go to priority topics"),
            _topic(BULK_TOPIC, "READ", why="its source"),
            _dedicated("READ", "WRITE", why="a dedicated tenant's job's source; its derived tag events"),
            _topic(CHANGES_TOPIC, "WRITE", why="change events of the catalog"),
            _IDEMPOTENT,
        ],
        "propagation": [
            _topic(CHANGES_TOPIC, "READ", "WRITE", why="reads changes; publishes its completed propagations"),
            _group(settings.propagation.group_id, "propagation.group_id"),
            _topic(PRIORITY_TOPIC, "WRITE", why="propagated tag events"),
            _dedicated("WRITE", why="propagated tag events of dedicated tenants"),
            _IDEMPOTENT,
        ],
        "outbound": [
            _topic(CHANGES_TOPIC, "READ", why="changes to notify"),
            _topic(OUTBOUND_TESTS_TOPIC, "READ", why="subscription test sends"),
            _group(settings.outbound.group_id, "outbound.group_id"),
            _topic(outbound_retry, "READ", "WRITE", why="deliveries waiting for their next attempt"),
            _group(settings.outbound.retry_group_id, "outbound.retry_group_id"),
            _topic(outbound_dlq, "WRITE", why="deliveries out of attempts"),
            _IDEMPOTENT,
        ],
        "access": [
            _topic(CHANGES_TOPIC, "READ", why="classification and propagated-tag changes that change Trino's rules"),
            _group(settings.access.group_id, "access.group_id"),
        ],
        "lake": [
            _topic(CHANGES_TOPIC, "WRITE", why="an erase's announcement"),
            # DESCRIBE for provisioning's existence checks; CREATE and DELETE: it creates and deletes them.
            _dedicated(
                "DESCRIBE", "CREATE", "DELETE", why="provisioning creates and deletes dedicated tenants' topics"
            ),
            _topic(CONNECT_OFFSETS_TOPIC, "READ", "WRITE", why="an erase tombstones the offsets naming the URN"),
            offsets_reader,
            _IDEMPOTENT,
        ],
    }


def principal(settings: Settings, process: Process) -> str:
    """The principal ``process`` authenticates as, with its type (``User:<name>``)."""
    name: str = getattr(settings.kafka.principals, process)
    return f"User:{name}"


def required_acls(settings: Settings, processes: Iterable[Process] = PROCESSES) -> list[Acl]:
    """Every ALLOW binding the ``processes`` need, one per operation, in the order of :data:`PROCESSES`; a binding
    two processes sharing one principal both need appears once."""
    grants = _grants(settings)
    seen: set[tuple[str, str, str, str, str]] = set()
    out: list[Acl] = []
    for process in processes:
        who = principal(settings, process)
        for grant in grants[process]:
            for operation in grant.operations:
                key = (who, grant.resource_type, grant.pattern, grant.name, operation)
                if key in seen:
                    continue
                seen.add(key)
                out.append(Acl(who, grant.resource_type, grant.pattern, grant.name, operation, process, grant.why))
    return out


def render(acls: Sequence[Acl]) -> str:
    """A table to read (one line per binding), aligned."""
    rows = [("PRINCIPAL", "OPERATION", "RESOURCE", "PATTERN", "NAME", "PROCESS: WHY")]
    rows += [(a.principal, a.operation, a.resource_type, a.pattern, a.name, f"{a.process}: {a.why}") for a in acls]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r[:5], widths, strict=True)) + "  " + r[5] for r in rows
    )


def kafka_acls_commands(acls: Sequence[Acl], bootstrap: str = "<brokers>", config: str = "<admin.properties>") -> str:
    """The same bindings as Kafka's own ``kafka-acls.sh`` commands (an operator who applies them by hand)."""
    flags = {"TOPIC": "--topic", "GROUP": "--group", "CLUSTER": "--cluster"}
    lines = []
    for a in acls:
        resource = flags[a.resource_type] if a.resource_type == "CLUSTER" else f"{flags[a.resource_type]} '{a.name}'"
        pattern = " --resource-pattern-type prefixed" if a.pattern == "PREFIXED" else ""
        operation = a.operation.replace("_", "").title() if a.operation != "IDEMPOTENT_WRITE" else "IdempotentWrite"
        lines.append(
            f"kafka-acls.sh --bootstrap-server {bootstrap} --command-config {config} --add "
            f"--allow-principal '{a.principal}' --operation {operation} {resource}{pattern}"
        )
    return "\n".join(lines)


# librdkafka calls Kafka's CLUSTER resource type (4) BROKER.
_RESOURCE_TYPES = {"TOPIC": ResourceType.TOPIC, "GROUP": ResourceType.GROUP, "CLUSTER": ResourceType.BROKER}


def _binding(acl: Acl) -> AclBinding:
    return AclBinding(
        _RESOURCE_TYPES[acl.resource_type],
        acl.name,
        ResourcePatternType[acl.pattern],
        acl.principal,
        "*",
        AclOperation[acl.operation],
        AclPermissionType.ALLOW,
    )


def apply(settings: Settings, acls: Sequence[Acl], timeout_s: float = 30.0) -> int:
    """Create the bindings on the cluster with the process's own Kafka client settings (an administrator: a super
    user, or ALTER on the cluster); existing ones stay as they are. Returns how many were sent; raises
    :class:`KafkaException` (the broker's error, e.g. CLUSTER_AUTHORIZATION_FAILED) if one was refused."""
    if not acls:
        return 0
    admin = AdminClient(client_config(settings))
    futures = admin.create_acls([_binding(a) for a in acls], request_timeout=timeout_s)
    for future in futures.values():
        future.result(timeout=timeout_s)
    return len(acls)


def render_markdown(acls: Sequence[Acl]) -> str:
    """The table docs/production.md shows: one row per principal and resource, its operations joined."""
    rows: dict[tuple[str, Process, str, str, str], tuple[list[str], str]] = {}
    for a in acls:
        key = (a.principal, a.process, a.resource_type, a.pattern, a.name)
        operations, _ = rows.setdefault(key, ([], a.why))
        operations.append(a.operation)
    lines = ["| principal (setting) | resource | pattern | name | operations | why |", "|---|---|---|---|---|---|"]
    for (who, process, resource, pattern, name), (operations, why) in rows.items():
        lines.append(f"| `{who}` (`{process}`) | {resource} | {pattern} | `{name}` | {', '.join(operations)} | {why} |")
    return "\n".join(lines)
