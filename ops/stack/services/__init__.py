"""One module per service of the local stack; ``SERVICES`` lists them in start order."""

from ops.stack.services.api import Api
from ops.stack.services.base import Service, StackContext
from ops.stack.services.connect import ConnectWorker
from ops.stack.services.ferretdb import FerretDB
from ops.stack.services.jaeger import Jaeger
from ops.stack.services.kafka import Kafka
from ops.stack.services.lake_worker import LakeWorker
from ops.stack.services.postgres import Postgres
from ops.stack.services.processors import Access, Outbound, Propagation
from ops.stack.services.prometheus import Prometheus
from ops.stack.services.seaweedfs import SeaweedFS
from ops.stack.services.spark import SparkMaster, SparkWorker
from ops.stack.services.stream import StreamJob
from ops.stack.services.trino import Trino

# Infrastructure first, each after what it ``requires`` (FerretDB stores in PostgreSQL; SeaweedFS, for a lake on S3,
# before Trino, whose metastore is then in the lake, and the processes that write the lake); the streaming job needs
# Kafka, FerretDB and (for table registration) Trino; the lake worker, which runs the erasures the API queues, starts
# with it (where Spark work runs); the processors of metalake.changes come last (they read what the job writes). The
# API comes before Trino: Trino reads the API's JWKS when it starts (JWT authentication with the built-in issuer), and
# the API needs only Kafka and FerretDB to start. The Spark standalone cluster runs only on request (a job on it needs
# it up first). The connector worker (webhooks, the ingest API, scheduled crawls) comes with the processors.
# Prometheus needs nothing to start: a target that is not up yet is scraped once it is. Jaeger (traces) neither: a
# process exports its spans once it is up; started before the processes, so their first spans find it.
SERVICES: tuple[Service, ...] = (
    Kafka(),
    Postgres(),
    FerretDB(),
    SeaweedFS(),
    Api(),
    Trino(),
    Prometheus(),
    Jaeger(),
    SparkMaster(),
    SparkWorker(),
    StreamJob(),
    LakeWorker(),
    Propagation(),
    Outbound(),
    Access(),
    ConnectWorker(),
)

__all__ = ["SERVICES", "Service", "StackContext"]
