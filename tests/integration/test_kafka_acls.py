"""The ACLs of ``metalake kafka acls`` on a broker that authorizes (KRaft's StandardAuthorizer, no ACL: no access,
the admin its only super user), applied by the command itself, then exercised by librdkafka clients built by
metalake's own config builders as each process's principal (SCRAM-SHA-512 over SASL_SSL): every process writes and
reads exactly the topics its process needs and is refused the rest, joins its own consumer groups and no other's,
and the lake worker (provisioning) creates and deletes a dedicated tenant's topics while no other principal can create
any;
the real propagation processor runs as its principal.

One broker for the module (tests/_support/acl_broker.py; the stack's broker has no authorizer)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from pydantic import SecretStr
from pymongo import MongoClient

from metalake.kafka import ensure_topics
from metalake.kafka.config import client_config, consumer_config, producer_config
from ops.cli.kafka_acls import PROCESSES, Acl, Process, required_acls
from ops.settings import Settings
from ops.stack.manager import StackManager
from ops.stack.services.kafka import sasl_ssl_client_settings
from tenants.naming import (
    BULK_TOPIC,
    CHANGES_TOPIC,
    CONNECT_OFFSETS_TOPIC,
    DEDICATED_TOPIC_PREFIX,
    OUTBOUND_TESTS_TOPIC,
    PRIORITY_TOPIC,
    dlq_topic,
    names_for,
    retry_topic,
)
from tests._support.acl_broker import ADMIN, AclBroker, acl_broker
from tests._support.itest import wait_for

pytestmark = pytest.mark.integration

# The platform's topics, created by the administrator at install (as `metalake stack up` does locally).
PLATFORM_TOPICS = [
    PRIORITY_TOPIC,
    BULK_TOPIC,
    CHANGES_TOPIC,
    OUTBOUND_TESTS_TOPIC,
    CONNECT_OFFSETS_TOPIC,
    dlq_topic("connectors"),
    dlq_topic("outbound"),
    retry_topic("outbound"),
]
# A dedicated tenant's topic, created by the admin before the ACLs: the prefixed grants cover it all the same.
DEDICATED = names_for("acl-tenant", Path("/unused"), dedicated=True).bulk_topic
TOPICS = [*PLATFORM_TOPICS, DEDICATED]
AUTHORIZATION = {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED}


def _as(settings: Settings, broker: AclBroker, user: str) -> Settings:
    kafka = settings.kafka.model_copy(
        update={
            "bootstrap_servers": broker.bootstrap,
            "sasl_username": user,
            "sasl_password": SecretStr(broker.passwords[user]),
        }
    )
    return settings.model_copy(update={"kafka": kafka})


@pytest.fixture(scope="module")
def base(settings: Settings, stack: StackManager) -> Settings:
    """SCRAM over SASL_SSL with the stack CA (the user and broker set per principal below)."""
    return settings.model_copy(update={"kafka": sasl_ssl_client_settings(stack.context)})


@pytest.fixture(scope="module")
def broker(base: Settings, stack: StackManager, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    users = [getattr(base.kafka.principals, p) for p in PROCESSES] + ["someone-else"]
    with acl_broker(stack.context, tmp_path_factory.mktemp("acl-broker"), users) as running:
        yield running


@pytest.fixture(scope="module")
def applied(base: Settings, broker: AclBroker) -> list[Acl]:
    """The platform's topics (one record each, from the admin), then the ACLs applied by the command."""
    admin = _as(base, broker, ADMIN)
    ensure_topics(admin, TOPICS, partitions=1)
    producer = Producer(producer_config(admin))
    for topic in TOPICS:
        producer.produce(topic, key=b"k", value=b"from the admin")
    assert producer.flush(30) == 0
    env = {
        **os.environ,
        "METALAKE_KAFKA__BOOTSTRAP_SERVERS": broker.bootstrap,
        "METALAKE_KAFKA__SECURITY_PROTOCOL": "SASL_SSL",
        "METALAKE_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512",
        "METALAKE_KAFKA__SASL_USERNAME": ADMIN,
        "METALAKE_KAFKA__SASL_PASSWORD": broker.passwords[ADMIN],
        "METALAKE_KAFKA__SSL_CA_LOCATION": str(admin.kafka.ssl_ca_location),
    }
    done = subprocess.run(
        [sys.executable, "-m", "ops", "kafka", "acls", "--apply"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    acls = required_acls(base)
    assert f"applied {len(acls)} ACL bindings" in done.stderr
    assert len(done.stdout.strip().splitlines()) == len(acls) + 1  # the header, one line per binding
    assert broker.passwords[ADMIN] not in done.stdout + done.stderr
    return acls


def _grants(acls: list[Acl], process: Process, resource: str, operation: str) -> bool:
    """Whether ``process``'s principal may ``operation`` on the topic or group ``resource`` per ``acls``."""
    return any(
        a.process == process
        and a.operation == operation
        and (a.name == resource if a.pattern == "LITERAL" else resource.startswith(a.name))
        for a in acls
    )


def _produce_each(settings: Settings, topics: list[str]) -> dict[str, KafkaError | None]:
    """One record to each topic (one producer, as the process's); the delivery error of each, None if written."""
    out: dict[str, KafkaError | None] = {}

    def delivered(err: KafkaError | None, msg: Message) -> None:
        out[msg.topic() or ""] = err

    producer = Producer(producer_config(settings, **{"delivery.timeout.ms": 10_000}))
    for topic in topics:
        producer.produce(topic, value=b"x", on_delivery=delivered)
    try:
        producer.flush(20)
    except KafkaException as exc:
        # A principal that may write nowhere gets no producer id: the idempotent producer fails as a whole.
        fatal: KafkaError = exc.args[0]
        assert fatal.fatal() and fatal.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, fatal
        purged = KafkaError._PURGE_QUEUE  # what librdkafka reports for the records it dropped
        out.update((t, fatal) for t in topics if t not in out or (out[t] and out[t].code() == purged))
    assert set(out) == set(topics), f"no delivery report for {set(topics) - set(out)}"
    return out


def _read_each(settings: Settings, group: str, topics: list[str]) -> dict[str, KafkaError | None]:
    """Fetch each topic from its start (assigned, no group join); the error of each, None if a record came. A topic
    the principal may not even describe is absent from its metadata: refused without a fetch."""
    consumer = Consumer(consumer_config(settings, group, **{"isolation.level": "read_uncommitted"}))
    refused = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "not in the principal's metadata")
    try:
        visible = consumer.list_topics(timeout=10).topics
        out: dict[str, KafkaError | None] = {t: refused for t in topics if t not in visible}
        consumer.assign([TopicPartition(t, 0, OFFSET_BEGINNING) for t in topics if t in visible])
        deadline = time.monotonic() + 20
        while set(out) != set(topics) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.topic() is None:
                continue
            error = msg.error()
            assert error is None or error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
            out.setdefault(msg.topic() or "", error)
    finally:
        consumer.close()
    assert set(out) == set(topics), f"neither a record nor an error from {set(topics) - set(out)}"
    return out


@pytest.mark.parametrize("process", PROCESSES)
def test_each_process_writes_the_topics_it_needs_and_no_other(
    process: Process, base: Settings, broker: AclBroker, applied: list[Acl]
) -> None:
    me = _as(base, broker, getattr(base.kafka.principals, process))
    results = _produce_each(me, TOPICS)
    written = {t for t, err in results.items() if err is None}
    assert written == {t for t in TOPICS if _grants(applied, process, t, "WRITE")}, results
    for topic, err in results.items():
        if err is not None:
            assert err.code() in AUTHORIZATION, (topic, err)


# A group like the Spark source's executors' (Spark's default groupIdPrefix): no ACL names it, none is needed.
SPARK_GROUP = "spark-kafka-source-it-executor"
# Every process's group for an assigned read (no join: the processes without a group of their own read so).
READ_GROUP: dict[Process, str] = {
    "api": "metalake-offsets-reader-it",
    "connect": "metalake-offsets-reader-it",
    "stream": SPARK_GROUP,
    "propagation": "metalake-propagation",
    "outbound": "metalake-outbound",
    "access": "metalake-access",
    "lake": "metalake-offsets-reader-it",
}


@pytest.mark.parametrize("process", PROCESSES)
def test_each_process_reads_the_topics_it_needs_and_no_other(
    process: Process, base: Settings, broker: AclBroker, applied: list[Acl]
) -> None:
    me = _as(base, broker, getattr(base.kafka.principals, process))
    results = _read_each(me, READ_GROUP[process], TOPICS)
    readable = {t for t in TOPICS if _grants(applied, process, t, "READ")}
    assert {t for t, err in results.items() if err is None} == readable, results
    assert {t for t, err in results.items() if err is not None} == set(TOPICS) - readable, results


def test_the_brief_examples_hold(applied: list[Acl]) -> None:
    """Spelled out, not derived: the connector worker cannot read the changes, the access processor cannot write
    them, the stream job cannot write a DLQ, and only the lake worker (which runs provisioning) may create topics (those
    of dedicated tenants)."""
    assert not _grants(applied, "connect", CHANGES_TOPIC, "READ")
    assert not _grants(applied, "access", CHANGES_TOPIC, "WRITE")
    assert not _grants(applied, "stream", dlq_topic("outbound"), "WRITE")
    creators = {a.process for a in applied if a.operation == "CREATE"}
    assert creators == {"lake"}
    assert all(a.pattern == "PREFIXED" and a.name == DEDICATED_TOPIC_PREFIX for a in applied if a.operation == "CREATE")


def _join(settings: Settings, group: str, topic: str) -> KafkaError | None:
    """Subscribe with ``group``, read a record and commit it: None if that worked, else the error."""
    consumer = Consumer(consumer_config(settings, group))
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                return msg.error()
            try:
                consumer.commit(msg, asynchronous=False)
            except KafkaException as exc:
                return exc.args[0]  # type: ignore[no-any-return]
            return None
        raise AssertionError(f"{group} on {topic}: neither a record nor an error in 30 s")
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("process", "group", "topic"),
    [
        ("propagation", "metalake-propagation", CHANGES_TOPIC),
        ("access", "metalake-access", CHANGES_TOPIC),
        ("outbound", "metalake-outbound", CHANGES_TOPIC),
        ("outbound", "metalake-outbound-retry", retry_topic("outbound")),
    ],
)
def test_a_process_joins_its_own_group(
    process: Process, group: str, topic: str, base: Settings, broker: AclBroker, applied: list[Acl]
) -> None:
    assert _join(_as(base, broker, getattr(base.kafka.principals, process)), group, topic) is None


@pytest.mark.parametrize(
    ("process", "group"),
    [
        ("access", "metalake-propagation"),  # it reads the same topic, but not as the other process
        ("propagation", "metalake-outbound"),
        ("outbound", "metalake-access"),
        ("stream", "metalake-propagation"),
    ],
)
def test_a_process_cannot_join_another_s_group(
    process: Process, group: str, base: Settings, broker: AclBroker, applied: list[Acl]
) -> None:
    error = _join(_as(base, broker, getattr(base.kafka.principals, process)), group, CHANGES_TOPIC)
    refused = {KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert error is not None and error.code() in refused
    if _grants(applied, process, CHANGES_TOPIC, "READ"):
        # The topic was readable: the group alone was refused.
        assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error


def _create(settings: Settings, topic: str) -> KafkaError | None:
    admin = AdminClient(client_config(settings))
    future = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)], operation_timeout=20)[topic]
    try:
        future.result(timeout=30)
    except KafkaException as exc:
        return exc.args[0]  # type: ignore[no-any-return]
    return None


def test_provisioning_creates_and_deletes_a_dedicated_tenant_s_topics_only(
    base: Settings, broker: AclBroker, applied: list[Acl]
) -> None:
    from control.provisioning.steps import StepContext, TopicsStep

    # The lake worker runs provisioning: its principal.
    lake = _as(base, broker, base.kafka.principals.lake)
    names = names_for(f"acl-{uuid.uuid4().hex[:8]}", Path("/unused"), dedicated=True)
    ctx = StepContext(lake, None, None)  # type: ignore[arg-type]  # the topics step uses the settings alone
    tenant = None  # nor the record
    step = TopicsStep()
    step.provision(ctx, tenant, names)  # type: ignore[arg-type]
    listed = AdminClient(client_config(lake)).list_topics(timeout=10).topics
    assert {names.priority_topic, names.bulk_topic} <= set(listed)
    # Its events go in as the connector worker, a new tenant with no ACL of its own.
    connect = _as(base, broker, base.kafka.principals.connect)
    assert _produce_each(connect, [names.priority_topic]) == {names.priority_topic: None}
    step.deprovision(ctx, tenant, names)  # type: ignore[arg-type]
    listed = AdminClient(client_config(lake)).list_topics(timeout=10).topics
    assert not {names.priority_topic, names.bulk_topic} & set(listed)

    # Outside the prefix, the lake worker creates nothing; the other processes (the API too) create nothing at all.
    refused = _create(lake, "metalake.not-a-tenant")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    for process in ("api", "connect", "stream", "propagation"):
        me = _as(base, broker, getattr(base.kafka.principals, process))
        refused = _create(me, names_for(f"acl-{process}", Path("/unused"), dedicated=True).priority_topic)
        assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, process


def test_a_principal_without_acls_does_nothing(base: Settings, broker: AclBroker, applied: list[Acl]) -> None:
    """No ACL, no access (allow.everyone.if.no.acl.found=false): authenticated is not enough."""
    nobody = _as(base, broker, "someone-else")
    assert all(err is not None for err in _produce_each(nobody, [CHANGES_TOPIC, PRIORITY_TOPIC]).values())
    assert all(err is not None for err in _read_each(nobody, "metalake-access", [CHANGES_TOPIC]).values())


def _env(settings: Settings) -> dict[str, str]:
    """The variables a process sets to be ``settings``' Kafka client."""
    kafka = settings.kafka
    assert kafka.sasl_password is not None
    return {
        "METALAKE_KAFKA__BOOTSTRAP_SERVERS": str(kafka.bootstrap_servers),
        "METALAKE_KAFKA__SECURITY_PROTOCOL": kafka.security_protocol,
        "METALAKE_KAFKA__SASL_MECHANISM": kafka.sasl_mechanism,
        "METALAKE_KAFKA__SASL_USERNAME": str(kafka.sasl_username),
        "METALAKE_KAFKA__SASL_PASSWORD": kafka.sasl_password.get_secret_value(),
        "METALAKE_KAFKA__SSL_CA_LOCATION": str(kafka.ssl_ca_location),
        "METALAKE_HEALTH__PORTS__PROPAGATION": "0",  # the stack's own processor may hold the port
    }


def test_the_propagation_processor_runs_as_its_principal(
    base: Settings,
    broker: AclBroker,
    applied: list[Acl],
    mongo: MongoClient[dict[str, Any]],
    tenant: str,
    tmp_path: Path,
) -> None:
    """The real `metalake propagation run` as User:metalake-propagation: joins its group, reads a change the
    streaming job's principal published, publishes the propagated tag to the dedicated tenant's priority topic (a
    topic no ACL names) and its completed event to the changes, and commits."""
    from metalake.kafka import EventProducer
    from processors.enrichment.changes import change_events
    from processors.enrichment.state import CLASSIFICATIONS, LINEAGE
    from tenants.model import Tier
    from tenants.registry import TenantDirectory, TenantRegistry, TenantState
    from tests._support.pipeline_procs import PropagationProcess
    from tests._support.stateseed import seed

    registry = TenantRegistry.connect(base)
    registry.create(tenant, Tier.DEDICATED)
    registry.set_state(tenant, TenantState.ACTIVE)
    names = TenantDirectory(registry, base.lake_root, ttl_s=0).names(tenant)
    database = mongo[names.mongo_database]
    processor: PropagationProcess | None = None
    try:
        # As provisioning (the lake worker) creates them.
        ensure_topics(_as(base, broker, base.kafka.principals.lake), [names.priority_topic, names.bulk_topic])
        users, customers = (f"urn:metalake:postgres:prod/shop/public/{t}/email" for t in ("users", "customers"))
        seed(database, LINEAGE, upstream=users, urn=customers)
        seed(database, CLASSIFICATIONS, urn=users, tag="PII", source="human", propagate=True)
        row = database[CLASSIFICATIONS.collection].find_one({"urn": users}, {"_id": 0})
        assert row is not None

        me = _as(base, broker, base.kafka.principals.propagation)
        processor = PropagationProcess(tenant, tmp_path / "propagation.log", "metalake-propagation", env=_env(me))
        processor.wait_ready(timeout_s=60)
        with EventProducer(_as(base, broker, base.kafka.principals.stream)) as producer:
            producer.publish(change_events(tenant, CLASSIFICATIONS, [row]), lambda e: CHANGES_TOPIC)

        # The propagated tag, read back as the streaming job (its source) would.
        reader = Consumer(consumer_config(_as(base, broker, base.kafka.principals.stream), SPARK_GROUP))
        reader.assign(
            [TopicPartition(names.priority_topic, p, OFFSET_BEGINNING) for p in range(base.kafka.topic_partitions)]
        )
        found: list[bytes] = []
        deadline = time.monotonic() + 60
        try:
            while not found and time.monotonic() < deadline:
                assert processor.proc.poll() is None, processor.tail()
                msg = reader.poll(0.5)
                if msg is not None and msg.error() is None:
                    found.append(msg.value() or b"")
        finally:
            reader.close()
        assert found and customers.encode() in found[0], processor.tail()

        # Its offsets committed in its group (after the publish), as the admin sees them.
        admin = AdminClient(client_config(_as(base, broker, ADMIN)))
        committed: list[TopicPartition] = []
        while time.monotonic() < deadline and not any(tp.offset > 0 for tp in committed):
            request = [ConsumerGroupTopicPartitions("metalake-propagation")]
            [future] = admin.list_consumer_group_offsets(request).values()
            committed = future.result(timeout=10).topic_partitions or []
            time.sleep(0.5)
        assert any(tp.topic == CHANGES_TOPIC and tp.offset > 0 for tp in committed), committed
    finally:
        if processor is not None:
            processor.stop()
        registry.delete(tenant)
        mongo.drop_database(names.mongo_database)
    log = processor.log.read_text()
    assert "kafka.security_error" not in log and "AUTHORIZATION_FAILED" not in log, log[-3000:]
    assert broker.passwords[base.kafka.principals.propagation] not in log


def test_the_streaming_job_runs_as_its_principal(
    base: Settings,
    broker: AclBroker,
    applied: list[Acl],
    mongo: MongoClient[dict[str, Any]],
    tenant: str,
    tmp_path: Path,
) -> None:
    """A dedicated tenant's streaming job as User:metalake-stream: its Spark source (the Java client: topic
    metadata and offsets through its admin client, fetches from assigned partitions: no group ACL) reads the
    tenant's topics, written by the connector worker's principal, and its librdkafka producer writes the changes."""
    from metalake.kafka import EventProducer
    from metalake.urn import asset_urn
    from tests._support.lakeit import upsert
    from tests._support.streamjob import Job, publish_confirmed

    names = names_for(tenant, base.lake_root, dedicated=True)
    ensure_topics(
        _as(base, broker, base.kafka.principals.lake), [names.priority_topic, names.bulk_topic]
    )  # provisioning
    urns = [asset_urn("postgres", "it", "acl", "public", f"t{i}") for i in range(2)]
    job = Job(tenant, tmp_path / "job.log", env=_env(_as(base, broker, base.kafka.principals.stream)))
    try:
        job.wait_ready()
        with EventProducer(_as(base, broker, base.kafka.principals.connect)) as producer:
            publish_confirmed(producer, [upsert(tenant, u, kind="table", name=u[-2:]) for u in urns], names)
        assets = mongo[names.mongo_database]["assets"]

        def in_mongo() -> bool | None:
            assert job.alive, job.tail()
            return sorted(d["_id"] for d in assets.find({}, {"_id": 1})) == sorted(urns) or None

        wait_for("the assets in MongoDB", in_mongo, timeout_s=180, interval_s=1)
        # Its changes reached metalake.changes (keyed by the tenant), as the access processor reads them.
        reader = Consumer(consumer_config(_as(base, broker, base.kafka.principals.access), "metalake-access"))
        keys: set[bytes] = set()
        try:
            reader.assign([TopicPartition(CHANGES_TOPIC, 0, OFFSET_BEGINNING)])
            deadline = time.monotonic() + 30
            while tenant.encode() not in keys and time.monotonic() < deadline:
                msg = reader.poll(0.5)
                if msg is not None and msg.error() is None:
                    keys.add(msg.key() or b"")
        finally:
            reader.close()
        assert tenant.encode() in keys
    finally:
        job.stop()
        mongo.drop_database(names.mongo_database)
    log = job.tail(200_000)
    assert "AuthorizationException" not in log and "AUTHORIZATION_FAILED" not in log, log[-3000:]
    assert "kafka.security_error" not in log


def test_the_offsets_store_and_the_dead_letter_listing_run_as_their_principals(
    base: Settings, broker: AclBroker, applied: list[Acl], tenant: str
) -> None:
    """metalake's own readers, which assign partitions under throwaway or fixed groups: the connector worker stores
    and loads offsets, the lake worker's erase forgets a tenant's, the API lists dead letters; the access processor
    reads no offsets."""
    from api.services.dead_letters.letters import DeadLetterTopics
    from control.connectors.offsets import OffsetStore, OffsetsUnavailable

    connect = OffsetStore(_as(base, broker, base.kafka.principals.connect))
    connect.store(tenant, "pg", {"public.t": {"lsn": 7}})
    assert connect.load(tenant, "pg", timeout_s=20) == {"public.t": {"lsn": 7}}
    assert OffsetStore(_as(base, broker, base.kafka.principals.lake)).forget_tenant(tenant, timeout_s=20) == 1
    assert connect.load(tenant, "pg", timeout_s=20) == {}
    assert DeadLetterTopics(_as(base, broker, base.kafka.principals.api)).scan(tenant).letters == []
    with pytest.raises((OffsetsUnavailable, KafkaException)):
        OffsetStore(_as(base, broker, base.kafka.principals.access)).load_all(timeout_s=10)
