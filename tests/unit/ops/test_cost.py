"""``metalake cost``: the bill grows with every input, dedicated tenants bring their own job, and the S3 price of
50 TB is near the design's estimate."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from ops.cli import app
from ops.cost.model import DESIGN_S3_TB, DESIGN_S3_USD, Bill, monthly_bill
from ops.cost.prices import TB, load_prices
from ops.cost.sizing import DEFAULT_SIZING, Workload

PRICES = load_prices()
BASES = [
    Workload(tenants=1, events_per_day=1_000, assets=1_000),
    Workload(tenants=3, events_per_day=10e6, assets=2e6, dedicated=1),
    # About 10 vCPU of streaming: the pooled and the dedicated jobs both above their minimum.
    Workload(tenants=2, events_per_day=111e6, assets=1e6, dedicated=1),
    Workload(tenants=50, events_per_day=300e6, assets=200e6, dedicated=2),
    Workload(tenants=400, events_per_day=5e9, assets=1e9, dedicated=40),
]
# Each input and the steps it grows by: small ones (where rounding to instances bites) and large ones.
STEPS: dict[str, list[float]] = {
    "tenants": [1, 2, 7, 100],
    "events_per_day": [1, 5e5, 3e7, 2e9],
    "assets": [1, 1e5, 5e7, 3e9],
    "dedicated": [1, 2, 5],
    "retention_days": [1, 30, 700],
    "sql_queries_per_tenant_hour": [1, 50, 5000],
}


def bill(w: Workload) -> Bill:
    return monthly_bill(w, DEFAULT_SIZING, PRICES)


def grown(w: Workload, name: str, step: float) -> Workload | None:
    value = getattr(w, name) + step
    if name == "dedicated" and value > w.tenants:
        return None
    return dataclasses.replace(w, **{name: type(getattr(w, name))(value)})


@pytest.mark.parametrize("name", sorted(STEPS))
def test_no_component_gets_cheaper_when_an_input_grows(name: str) -> None:
    checked = 0
    for base in BASES:
        # Grow from several points, each step from the one before, so a rounding dip anywhere shows.
        current = base
        for step in STEPS[name] * 3:
            bigger = grown(current, name, step)
            if bigger is None:
                continue
            before, after = bill(current), bill(bigger)
            for line in before.lines:
                assert after.line(line.component).usd >= line.usd - 1e-6, (name, current, bigger, line)
            for size in ("spark_vcpu", "process_vcpu", "lake_tb"):
                assert after.sizes[size] >= before.sizes[size] - 1e-9, (name, current, bigger, size)
            checked += 1
            current = bigger
    assert checked >= 6


@pytest.mark.parametrize(
    ("name", "step", "component"),
    [
        ("events_per_day", 5e9, "EKS nodes: Spark"),
        ("events_per_day", 5e9, "MSK storage"),
        ("assets", 5e9, "S3 storage"),
        ("assets", 5e9, "DocumentDB storage"),
        ("tenants", 5000, "Trino"),
        ("retention_days", 3000, "S3 storage"),
    ],
)
def test_a_large_growth_shows_in_its_component(name: str, step: float, component: str) -> None:
    base = BASES[1]
    bigger = grown(base, name, step)
    assert bigger is not None
    assert bill(bigger).line(component).usd > bill(base).line(component).usd * 1.5


def test_each_dedicated_tenant_adds_its_own_job() -> None:
    pooled_only = Workload(tenants=10, events_per_day=1e6, assets=1e6)
    with_one = dataclasses.replace(pooled_only, dedicated=1)
    with_three = dataclasses.replace(pooled_only, dedicated=3)
    s0, s1, s3 = (bill(w).sizes for w in (pooled_only, with_one, with_three))
    # A quiet tenant still gets a whole job (the benchmark's minimum), beside the pooled one, which stays.
    assert s1["spark_pooled_vcpu"] == DEFAULT_SIZING.job_min_vcpu
    spark_total = [
        s["spark_pooled_vcpu"] + w.dedicated * s["spark_dedicated_vcpu_each"]
        for s, w in ((s0, pooled_only), (s1, with_one), (s3, with_three))
    ]
    assert spark_total == [2.0, 4.0, 8.0]
    assert "1 dedicated job(s)" in bill(with_one).line("EKS nodes: Spark").detail
    # Its job commits its own lake batches.
    assert bill(with_one).line("S3 requests").usd > bill(pooled_only).line("S3 requests").usd
    # And its tenant pays for it: more than a pooled one.
    per_tenant = bill(with_three).per_tenant
    assert per_tenant["dedicated"] > per_tenant["pooled"]


def test_all_dedicated_runs_no_pooled_job() -> None:
    b = bill(Workload(tenants=2, events_per_day=1e6, assets=1e6, dedicated=2))
    assert b.sizes["spark_pooled_vcpu"] == 0
    assert "no pooled job" in b.line("EKS nodes: Spark").detail
    assert set(b.per_tenant) == {"dedicated"}


@pytest.mark.parametrize("w", BASES)
def test_the_tenants_pay_the_whole_bill(w: Workload) -> None:
    b = bill(w)
    paid = b.per_tenant.get("pooled", 0.0) * w.pooled + b.per_tenant.get("dedicated", 0.0) * w.dedicated
    assert paid == pytest.approx(b.total)


def test_s3_for_50_tb_is_near_the_designs_estimate() -> None:
    # The design: S3 about $1,000 a month for 50 TB.
    price = PRICES.s3_storage_month(DESIGN_S3_TB * TB)
    assert 0.9 * DESIGN_S3_USD <= price <= 1.25 * DESIGN_S3_USD
    # And through the model: a lake the events history fills to about 50 TB in a year.
    events_per_day = DESIGN_S3_TB * TB / 365 / DEFAULT_SIZING.delta_bytes_per_event
    b = bill(Workload(tenants=20, events_per_day=events_per_day, assets=0))
    assert b.sizes["lake_tb"] == pytest.approx(DESIGN_S3_TB, rel=0.01)
    assert b.line("S3 storage").usd == pytest.approx(price, rel=0.01)


def test_s3_storage_is_priced_by_tier() -> None:
    first_tier = 50 * 1024 * 2**30
    assert PRICES.s3_storage_month(first_tier) == pytest.approx(50 * 1024 * 0.023)
    # A TB above 50 TB costs the second tier's rate.
    assert PRICES.s3_storage_month(first_tier + 1024 * 2**30) - PRICES.s3_storage_month(first_tier) == pytest.approx(
        1024 * 0.022
    )


def test_the_price_file_says_its_date_region_and_sources() -> None:
    assert PRICES.region == "us-east-1"
    assert PRICES.as_of
    assert {"ec2", "eks", "msk", "s3", "documentdb"} <= set(PRICES.raw["sources"])
    assert "check" in PRICES.raw["check"].lower()


def test_the_command_prints_a_table_and_json() -> None:
    args = ["cost", "--tenants", "20", "--events-per-day", "5e7", "--assets", "1e8", "--dedicated", "1"]
    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0, table.output
    for component in ("MSK brokers", "EKS nodes: Spark", "S3 storage", "DocumentDB instances", "Trino", "total"):
        assert component in table.output
    assert "one dedicated tenant" in table.output and "50 TB" in table.output
    out = CliRunner().invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["total_usd_month"] == pytest.approx(sum(line["usd"] for line in doc["lines"]), abs=0.01)
    assert doc["region"] == "us-east-1" and set(doc["per_tenant_usd_month"]) == {"pooled", "dedicated"}


def test_the_command_refuses_more_dedicated_than_tenants() -> None:
    result = CliRunner().invoke(
        app, ["cost", "--tenants", "2", "--events-per-day", "1", "--assets", "1", "--dedicated", "3"]
    )
    assert result.exit_code != 0
    assert "dedicated" in result.output


def test_the_example_of_docs_cost_md_is_what_the_command_prints() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "cost.md").read_text("utf-8")
    command = doc.split("```bash\n", 1)[1].splitlines()[0].split()
    assert command[0].endswith("metalake")
    result = CliRunner().invoke(app, command[1:])
    assert result.exit_code == 0, result.output
    shown = doc.split("```text\n", 1)[1].split("```", 1)[0]
    assert shown.strip() and all(line in result.output for line in shown.splitlines())
