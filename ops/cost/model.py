"""The monthly AWS bill of a metalake platform: one line per component, and what each tenant costs.

Pure arithmetic over a :class:`~ops.cost.sizing.Workload`, the sizing rules (:mod:`ops.cost.sizing`) and the price
file (:mod:`ops.cost.prices`). Resources are sized fractionally and rounded only to whole instances, so the bill never
falls when an input grows (tests/unit/ops/test_cost.py).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ops.cost.prices import GB, TB, Instance, Prices
from ops.cost.sizing import Sizing, Workload

SECONDS_PER_DAY = 86_400.0
SPARK_NODE = "m6i.xlarge"
PROCESS_NODE = "m6i.xlarge"
TRINO_COORDINATOR = "m6i.xlarge"
TRINO_WORKER = "m6i.2xlarge"
MSK_BROKER = "kafka.m5.large"
DESIGN_S3_TB = 50.0
DESIGN_S3_USD = 1000.0


@dataclass(frozen=True)
class Line:
    component: str
    detail: str
    usd: float


@dataclass(frozen=True)
class Bill:
    workload: Workload
    region: str
    prices_as_of: str
    lines: list[Line]
    per_tenant: dict[str, float]
    sizes: dict[str, float] = field(default_factory=dict)
    # The design's estimate (S3 about $1,000 a month for 50 TB) against these prices for the same 50 TB.
    s3_50tb_usd: float = 0.0

    @property
    def total(self) -> float:
        return sum(line.usd for line in self.lines)

    def line(self, component: str) -> Line:
        return next(line for line in self.lines if line.component == component)

    def as_json(self) -> dict[str, Any]:
        return {
            "workload": asdict(self.workload),
            "region": self.region,
            "prices_as_of": self.prices_as_of,
            "currency": "USD",
            "lines": [asdict(line) for line in self.lines],
            "total_usd_month": round(self.total, 2),
            "per_tenant_usd_month": {k: round(v, 2) for k, v in self.per_tenant.items()},
            "sizes": self.sizes,
            "design_s3_check": {
                "design_tb": DESIGN_S3_TB,
                "design_usd_month": DESIGN_S3_USD,
                "these_prices_usd_month": round(self.s3_50tb_usd, 2),
            },
        }


def peak_events_s(events_per_day: float, sizing: Sizing) -> float:
    return events_per_day / SECONDS_PER_DAY * sizing.peak_to_average


def job_vcpu(events_per_day: float, sizing: Sizing) -> float:
    """One streaming job's vCPUs: its peak rate at the benchmark's events per vCPU, never below the minimum."""
    return max(sizing.job_min_vcpu, peak_events_s(events_per_day, sizing) / sizing.job_events_per_vcpu_s)


def spark_vcpu(w: Workload, sizing: Sizing) -> tuple[float, float]:
    """The pooled job's vCPUs (none without pooled tenants) and one dedicated tenant's job's. Events are spread
    evenly over the tenants."""
    per_tenant = w.events_per_day / w.tenants
    pooled = job_vcpu(per_tenant * w.pooled, sizing) if w.pooled else 0.0
    return pooled, job_vcpu(per_tenant, sizing)


def nodes(vcpu: float, node: Instance, minimum: int = 1) -> int:
    return max(minimum, math.ceil(vcpu / node.vcpu - 1e-9))


def _monthly(prices: Prices, instance: Instance, count: int) -> float:
    return count * instance.usd_hour * prices.hours


def lake_bytes(w: Workload, sizing: Sizing) -> float:
    state = w.assets * sizing.delta_bytes_per_asset * (1 + sizing.delta_replaced_fraction)
    return state + w.events_per_day * w.retention_days * sizing.delta_bytes_per_event


def queries_per_s(w: Workload, sizing: Sizing) -> float:
    return w.tenants * w.sql_queries_per_tenant_hour / 3600.0 * sizing.peak_to_average


def msk_lines(w: Workload, sizing: Sizing, prices: Prices) -> list[Line]:
    broker = prices.instance("msk_broker_hourly", MSK_BROKER)
    ingress_mb_s = peak_events_s(w.events_per_day, sizing) * sizing.kafka_bytes_per_event / 1e6
    # Brokers come in threes (one per zone).
    count = 3 * max(1, math.ceil(ingress_mb_s / (3 * sizing.kafka_mb_s_per_broker) - 1e-9))
    stored_gb = (
        w.events_per_day * sizing.kafka_retention_days * sizing.kafka_bytes_per_event * sizing.kafka_replication / GB
    )
    return [
        Line(
            "MSK brokers", f"{count} x {MSK_BROKER} (peak {ingress_mb_s:.2f} MB/s in)", _monthly(prices, broker, count)
        ),
        Line(
            "MSK storage",
            f"{stored_gb:,.0f} GB ({sizing.kafka_retention_days:g} days x {sizing.kafka_replication} replicas)",
            stored_gb * prices.rate("msk_storage_gb_month"),
        ),
    ]


def eks_lines(w: Workload, sizing: Sizing, prices: Prices) -> tuple[list[Line], dict[str, float]]:
    spark_node, process_node = prices.instance("ec2_hourly", SPARK_NODE), prices.instance("ec2_hourly", PROCESS_NODE)
    pooled, dedicated_each = spark_vcpu(w, sizing)
    spark_total = pooled + w.dedicated * dedicated_each
    spark_nodes = nodes(spark_total, spark_node)
    connector = max(
        sizing.connector_min_vcpu, peak_events_s(w.events_per_day, sizing) / sizing.connector_events_per_vcpu_s
    )
    process_vcpu = sizing.processes_fixed_vcpu + connector
    process_nodes = nodes(process_vcpu, process_node, minimum=2)
    jobs = f"pooled job {pooled:.1f} vCPU" if w.pooled else "no pooled job"
    if w.dedicated:
        jobs += f" + {w.dedicated} dedicated job(s) x {dedicated_each:.1f} vCPU"
    lines = [
        Line("EKS control plane", "1 cluster", prices.rate("eks_cluster_hourly") * prices.hours),
        Line("EKS nodes: Spark", f"{spark_nodes} x {SPARK_NODE} ({jobs})", _monthly(prices, spark_node, spark_nodes)),
        Line(
            "EKS nodes: processes",
            f"{process_nodes} x {PROCESS_NODE} ({process_vcpu:.1f} vCPU: API, connector workers {connector:.1f}, "
            "lake worker, propagation, outbound, access)",
            _monthly(prices, process_node, process_nodes),
        ),
    ]
    sizes = {
        "spark_pooled_vcpu": pooled,
        "spark_dedicated_vcpu_each": dedicated_each,
        "spark_vcpu": spark_total,
        "spark_nodes": spark_nodes,
        "process_vcpu": process_vcpu,
    }
    return lines, sizes


def s3_lines(w: Workload, sizing: Sizing, prices: Prices) -> list[Line]:
    stored = lake_bytes(w, sizing)
    jobs = (1 if w.pooled else 0) + w.dedicated
    batches = jobs * prices.hours * 3600.0 / sizing.lake_batch_s
    queries = w.tenants * w.sql_queries_per_tenant_hour * prices.hours
    puts = batches * sizing.s3_puts_per_batch + queries * sizing.s3_lists_per_query
    gets = batches * sizing.s3_gets_per_batch + queries * sizing.s3_gets_per_query
    return [
        Line("S3 storage", f"{stored / TB:,.2f} TB in Delta", prices.s3_storage_month(stored)),
        Line(
            "S3 requests",
            f"{puts / 1e6:,.1f} M PUT/LIST, {gets / 1e6:,.1f} M GET ({jobs} job(s), {queries / 1e6:,.2f} M queries)",
            puts / 1000 * prices.rate("s3_put_per_1000") + gets / 1000 * prices.rate("s3_get_per_1000"),
        ),
    ]


def documentdb_lines(w: Workload, sizing: Sizing, prices: Prices) -> list[Line]:
    stored_gb = w.assets * sizing.mongo_bytes_per_asset / GB
    hot_gib = stored_gb * sizing.mongo_memory_fraction * GB / 2**30
    choices = prices.instances("documentdb_instance_hourly")
    instance = next((i for i in choices if i.memory_gib >= hot_gib), choices[-1])
    # Beyond the largest instance the projection is split (an elastic cluster's shards, or tenants over clusters).
    shards = max(1, math.ceil(hot_gib / instance.memory_gib - 1e-9))
    ios = w.events_per_day * 30.4 * sizing.mongo_io_per_event
    split = f"{shards} shards x " if shards > 1 else ""
    return [
        Line(
            "DocumentDB instances",
            f"{split}2 x {instance.name} (primary + replica; hot set {hot_gib:,.1f} GiB)",
            _monthly(prices, instance, 2 * shards),
        ),
        Line("DocumentDB storage", f"{stored_gb:,.1f} GB", stored_gb * prices.rate("documentdb_storage_gb_month")),
        Line("DocumentDB I/O", f"{ios / 1e6:,.0f} M I/Os", ios / 1e6 * prices.rate("documentdb_io_per_million")),
    ]


def trino_lines(w: Workload, sizing: Sizing, prices: Prices) -> list[Line]:
    coordinator = prices.instance("ec2_hourly", TRINO_COORDINATOR)
    worker = prices.instance("ec2_hourly", TRINO_WORKER)
    qps = queries_per_s(w, sizing)
    vcpu = qps * sizing.trino_vcpu_s_per_query / sizing.trino_target_utilisation
    workers = nodes(vcpu, worker)
    return [
        Line(
            "Trino",
            f"1 x {TRINO_COORDINATOR} coordinator + {workers} x {TRINO_WORKER} ({qps:.2f} queries/s at peak)",
            _monthly(prices, coordinator, 1) + _monthly(prices, worker, workers),
        )
    ]


def per_tenant(w: Workload, lines: list[Line], sizes: dict[str, float]) -> dict[str, float]:
    """Shared components split evenly (events are assumed even); the Spark nodes by the vCPUs of each job."""
    spark = next(line.usd for line in lines if line.component == "EKS nodes: Spark")
    shared = sum(line.usd for line in lines) - spark
    pooled_vcpu, dedicated_vcpu = sizes["spark_pooled_vcpu"], sizes["spark_dedicated_vcpu_each"]
    total_vcpu = pooled_vcpu + w.dedicated * dedicated_vcpu
    per_vcpu = spark / total_vcpu
    out: dict[str, float] = {}
    if w.pooled:
        out["pooled"] = shared / w.tenants + pooled_vcpu * per_vcpu / w.pooled
    if w.dedicated:
        out["dedicated"] = shared / w.tenants + dedicated_vcpu * per_vcpu
    return out


def monthly_bill(w: Workload, sizing: Sizing, prices: Prices) -> Bill:
    eks, sizes = eks_lines(w, sizing, prices)
    lines = [
        *msk_lines(w, sizing, prices),
        *eks,
        *s3_lines(w, sizing, prices),
        *documentdb_lines(w, sizing, prices),
        *trino_lines(w, sizing, prices),
    ]
    sizes["lake_tb"] = lake_bytes(w, sizing) / TB
    s3_50tb = prices.s3_storage_month(DESIGN_S3_TB * TB)
    return Bill(w, prices.region, prices.as_of, lines, per_tenant(w, lines, sizes), sizes, s3_50tb)
