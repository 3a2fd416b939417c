"""AWS list prices kept in the repository (one JSON file per region, with its date and sources)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PRICE_DIR = Path(__file__).resolve().parent
DEFAULT_REGION = "us-east-1"
GB = 1e9
TB = 1e12


@dataclass(frozen=True)
class Instance:
    name: str
    vcpu: int
    memory_gib: float
    usd_hour: float


@dataclass(frozen=True)
class Prices:
    raw: dict[str, Any]

    @property
    def region(self) -> str:
        return str(self.raw["region"])

    @property
    def as_of(self) -> str:
        return str(self.raw["as_of"])

    @property
    def hours(self) -> float:
        return float(self.raw["hours_per_month"])

    def instance(self, table: str, name: str) -> Instance:
        row = self.raw[table][name]
        return Instance(name, int(row["vcpu"]), float(row["memory_gib"]), float(row["usd"]))

    def instances(self, table: str) -> list[Instance]:
        """A table's instances, smallest first."""
        return sorted((self.instance(table, n) for n in self.raw[table]), key=lambda i: (i.memory_gib, i.usd_hour))

    def rate(self, key: str) -> float:
        return float(self.raw[key])

    def s3_storage_month(self, stored_bytes: float) -> float:
        """S3 Standard's monthly storage price for this many bytes, tier by tier (AWS counts a TB as 1024 GB)."""
        gb_left, total, floor_gb = stored_bytes / 2**30, 0.0, 0.0
        for tier in self.raw["s3_storage_gb_month_tiers"]:
            ceiling = float("inf") if tier["up_to_tb"] is None else tier["up_to_tb"] * 1024.0
            in_tier = min(gb_left, ceiling - floor_gb)
            total += in_tier * float(tier["usd"])
            gb_left -= in_tier
            floor_gb = ceiling
            if gb_left <= 0:
                break
        return total


def load_prices(region: str = DEFAULT_REGION, path: Path | None = None) -> Prices:
    """The price file of a region (``ops/cost/aws-<region>.json``) or the one named."""
    file = path or PRICE_DIR / f"aws-{region}.json"
    if not file.is_file():
        known = sorted(p.stem.removeprefix("aws-") for p in PRICE_DIR.glob("aws-*.json"))
        raise FileNotFoundError(f"no price file for region {region!r} ({file}); known: {', '.join(known)}")
    return Prices(json.loads(file.read_text("utf-8")))
