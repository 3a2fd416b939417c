"""``metalake cost``: the monthly AWS bill of a platform, per component and per tenant (docs/cost.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from metalake.console import fail
from ops.cost.model import DESIGN_S3_TB, DESIGN_S3_USD, Bill, monthly_bill
from ops.cost.prices import DEFAULT_REGION, load_prices
from ops.cost.sizing import DEFAULT_SIZING, Workload

app = typer.Typer(add_completion=False, rich_markup_mode=None)

HELP = (
    "Estimate what a metalake platform costs on AWS each month: MSK, the EKS nodes of the Spark jobs and of the "
    "processes, S3 storage and requests for the Delta lake, DocumentDB for the MongoDB projection, and Trino; then "
    "what one pooled and one dedicated tenant cost (shared parts split evenly, each job's nodes to its tenants). "
    "Prices: AWS on-demand list prices kept in ops/cost/aws-<region>.json with their date and sources; check them "
    "before quoting. Sizing: rules measured in docs/benchmarks.md (events per vCPU of the streaming job, bytes per "
    "asset in Delta and MongoDB, Trino vCPU per query) and stated assumptions, explained in docs/cost.md. Events are "
    "assumed spread evenly over the tenants, with a peak hour at 3x the day's average rate."
)


@app.command("cost", help=HELP)
def cost(  # noqa: PLR0913
    tenants: Annotated[int, typer.Option(min=1, help="Tenants on the platform, pooled and dedicated together.")],
    events_per_day: Annotated[
        float, typer.Option(min=0, help="Events a day over all tenants (asset upserts, tags, lineage, incidents).")
    ],
    assets: Annotated[float, typer.Option(min=0, help="Assets in the catalog over all tenants (columns included).")],
    dedicated: Annotated[
        int, typer.Option(min=0, help="How many of the tenants are dedicated (each runs its own streaming job).")
    ] = 0,
    retention_days: Annotated[
        int, typer.Option(min=1, help="Days of event history kept in Delta's `events` table.")
    ] = 365,
    queries_per_tenant_hour: Annotated[
        float, typer.Option(min=0, help="SQL queries a tenant runs through Trino each hour, on average.")
    ] = 60.0,
    region: Annotated[str, typer.Option(help="The price file's region (ops/cost/aws-<region>.json).")] = DEFAULT_REGION,
    prices_file: Annotated[
        Path | None, typer.Option("--prices", help="Another price file in the same format.", dir_okay=False)
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the bill as JSON instead of a table.")] = False,
) -> None:
    try:
        workload = Workload(tenants, events_per_day, assets, dedicated, retention_days, queries_per_tenant_hour)
        prices = load_prices(region, prices_file)
    except (ValueError, FileNotFoundError) as exc:
        raise fail(str(exc)) from exc
    bill = monthly_bill(workload, DEFAULT_SIZING, prices)
    typer.echo(json.dumps(bill.as_json(), indent=2) if as_json else render(bill))


def render(bill: Bill) -> str:
    w = bill.workload
    width = max(len(line.component) for line in bill.lines)
    head = (
        f"metalake on AWS {bill.region}, prices of {bill.prices_as_of} (on-demand list prices: check them)\n"
        f"{w.tenants} tenants ({w.dedicated} dedicated), {w.events_per_day:,.0f} events/day, {w.assets:,.0f} assets, "
        f"{w.retention_days} days of events, {w.sql_queries_per_tenant_hour:g} queries/tenant/hour\n"
    )
    rows = [f"{'component':{width}}  {'USD/month':>11}  sizing", f"{'-' * width}  {'-' * 11}  {'-' * 6}"]
    rows += [f"{line.component:{width}}  {line.usd:>11,.2f}  {line.detail}" for line in bill.lines]
    rows.append(f"{'total':{width}}  {bill.total:>11,.2f}")
    tenants = [f"  one {kind} tenant: {usd:,.2f} USD/month" for kind, usd in bill.per_tenant.items()]
    design = (
        f"The design's S3 estimate, about {DESIGN_S3_USD:,.0f} USD/month for {DESIGN_S3_TB:g} TB: these prices give "
        f"{bill.s3_50tb_usd:,.0f} USD/month for {DESIGN_S3_TB:g} TB (this lake: {bill.sizes['lake_tb']:,.2f} TB)."
    )
    return "\n".join([head, *rows, "", "Per tenant:", *tenants, "", design])
