"""What each soak tenant sends through the ingest API: a catalog that grows and changes, as structured CloudEvents.

Each draw is a bundle: mostly one update of an asset the tenant already has (a new version of a table or a column),
sometimes a new table with four columns, one of them named like personal data (``email``, ``phone``, ...: the job
tags it PII by itself) and one fed from the previous table's PII column by a column lineage edge (so the tag
propagates to it), sometimes a tag put on a table. So the stream job, propagation and outbound all have work for the
whole run. Versions increase per asset; the newest (version, event id) of every asset is kept for the end's check.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from metalake.urn import asset_urn
from ops.demo.catalog import DB

SOURCE = "/bench/soak"
UPSERT = "io.metalake.asset.upserted.v1"
EDGE = "io.metalake.lineage.edge.added.v1"
TAGGED = "io.metalake.classification.added.v1"
#: Names the automatic classification tags PII (docs/propagation.md), with a type the text rules need.
PII_COLUMNS = ("email", "phone", "first_name", "date_of_birth", "ip_address")
NEW_TABLE_SHARE = 0.03  # of bundles: ~7 % of events are new assets, each new table brings two PII tags
TAG_SHARE = 0.02
SCHEMA = "soak"


def table_urn(n: int) -> str:
    """Under the demo's instance and database, so a Monte Carlo connector configured as the demo's resolves it."""
    return asset_urn(*DB, SCHEMA, f"t{n}")


def event(tenant: str, type_: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": str(uuid.uuid4()),
        "source": SOURCE,
        "type": type_,
        "tenantid": tenant,
        "data": data,
    }


@dataclass
class TenantCatalog:
    """One tenant's catalog as the bench knows it; ``newest`` maps an asset URN to its newest (version, event id)."""

    tenant: str
    rng: random.Random
    tables: int = 0
    columns: list[tuple[str, str]] = field(default_factory=list)  # (urn, data type)
    newest: dict[str, tuple[int, str]] = field(default_factory=dict)
    _last: dict[str, int] = field(default_factory=dict)

    def version(self, urn: str) -> int:
        """The source's clock in ms, never below the asset's last version + 1."""
        v = max(int(time.time() * 1000), self._last.get(urn, 0) + 1)
        self._last[urn] = v
        return v

    def upsert(self, urn: str, kind: str, name: str, **extra: Any) -> dict[str, Any]:
        data = {"urn": urn, "version": self.version(urn), "kind": kind, "name": name, **extra}
        return event(self.tenant, UPSERT, data)

    def new_table(self) -> list[dict[str, Any]]:
        n, self.tables = self.tables, self.tables + 1
        urn = table_urn(n)
        pii = PII_COLUMNS[n % len(PII_COLUMNS)]
        out = [self.upsert(urn, "table", f"t{n}", description=f"soak table {n}")]
        for name, type_ in (("id", "bigint"), ("amount", "numeric"), (pii, "varchar"), ("contact", "varchar")):
            out.append(self.upsert(f"{urn}/{name}", "column", name, data_type=type_))
            self.columns.append((f"{urn}/{name}", type_))
        if n > 0:
            upstream = f"{table_urn(n - 1)}/{PII_COLUMNS[(n - 1) % len(PII_COLUMNS)]}"
            edge = {"urn": f"{urn}/contact", "upstream": upstream, "version": self.version(f"edge:{urn}")}
            out.append(event(self.tenant, EDGE, edge))
        return out

    def update(self) -> dict[str, Any]:
        """A new version of a table or a column the tenant has: its whole state (an upsert replaces it), with a new
        description."""
        n = self.rng.randrange(self.tables)
        if self.rng.random() < 0.3:
            return self.upsert(table_urn(n), "table", f"t{n}", description=f"soak table {n} at {time.time():.0f}")
        urn, type_ = self.rng.choice(self.columns[-400:])
        name = urn.rsplit("/", 1)[1]
        return self.upsert(urn, "column", name, data_type=type_, description=f"updated at {time.time():.0f}")

    def tag(self) -> dict[str, Any]:
        urn = table_urn(self.rng.randrange(self.tables))
        data = {"urn": urn, "version": self.version(f"tag:{urn}"), "tag": "Tier1", "source": "human"}
        return event(self.tenant, TAGGED, data)

    def draw(self) -> list[dict[str, Any]]:
        roll = self.rng.random()
        if self.tables == 0 or roll < NEW_TABLE_SHARE:
            return self.new_table()
        return [self.tag()] if roll < NEW_TABLE_SHARE + TAG_SHARE else [self.update()]

    def accepted(self, events: list[dict[str, Any]]) -> None:
        """Kafka confirmed these: each upsert may now be its asset's newest state."""
        for e in events:
            if e["type"] == UPSERT:
                data = e["data"]
                mine = (int(data["version"]), e["id"])
                if mine > self.newest.get(data["urn"], (0, "")):
                    self.newest[data["urn"]] = mine
