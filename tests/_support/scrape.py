"""Reading an exposition in Prometheus' text format: one sample's value by its name and labels."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families


def sample(text: str, name: str, labels: Mapping[str, str]) -> float:
    """The value of sample ``name`` (e.g. ``metalake_freshness_seconds_count``) whose labels include ``labels``;
    0 when there is none (a series not recorded yet)."""
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


def scrape(url: str, token: str) -> str:
    """GET ``url`` (a /metrics route) with the bearer token; raises on anything but 200."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})  # noqa: S310 - loopback
    with urllib.request.urlopen(request, timeout=15) as resp:  # noqa: S310
        return resp.read().decode()


def try_scrape(url: str, token: str) -> str | None:
    """``scrape``, or None while nothing answers yet."""
    try:
        return scrape(url, token)
    except (urllib.error.URLError, OSError):
        return None


def series(text: str, name: str, labels: Mapping[str, str]) -> list[float]:
    """The values of every sample ``name`` whose labels include ``labels`` (none: the series is not exposed)."""
    return [
        float(s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]


def status_of(url: str, token: str | None) -> int:
    """The status ``url`` answers, with the bearer token or without any; 0 while nothing listens."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 - loopback
    try:
        with urllib.request.urlopen(request, timeout=15) as resp:  # noqa: S310
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return 0
