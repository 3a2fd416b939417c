"""The soak's figure: five panels over the run's time (freshness p50/p99 per store, consumer lag per process, intake
and deliveries per second, resident memory per process), each fault a labelled vertical line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: a file only
import matplotlib.pyplot as plt  # after the backend is chosen

from soak.analysis import MIB, OBJECTIVE_S
from soak.faults import Fault
from soak.prom import Series
from soak.rss import Sample

ShortName = {"kill-stream": "kill stream", "kill-propagation": "kill prop.", "kill-outbound": "kill outb."}


def _lines(ax: Any, series: Series, t0: float, prefix: str = "") -> None:
    for label, points in sorted(series.items()):
        if points:
            ax.plot([(t - t0) / 60 for t, _ in points], [v for _, v in points], label=f"{prefix}{label}", lw=0.9)


def _faults(axes: list[Any], faults: list[Fault], t0: float) -> None:
    for ax in axes:
        for f in faults:
            ax.axvline((f.at - t0) / 60, color="red", lw=0.7, ls="--", alpha=0.6)
    for f in faults:
        name = ShortName.get(f.kind, f.kind)
        axes[0].annotate(name, ((f.at - t0) / 60, 1.0), xycoords=("data", "axes fraction"), rotation=90,
                         fontsize=6, va="top", ha="right", color="red")  # fmt: skip


def _rss(ax: Any, samples: list[Sample], t0: float) -> None:
    for name in sorted({n for s in samples for n in s.rss}):
        pts = [((s.at - t0) / 60, s.rss[name] / MIB) for s in samples if name in s.rss]
        ax.plot([t for t, _ in pts], [v for _, v in pts], label=name, lw=0.9)


def draw(out: Path, curves: dict[str, Series], samples: list[Sample], faults: list[Fault], t0: float) -> None:
    fig, axes = plt.subplots(5, 1, figsize=(11, 15), sharex=True)
    _lines(axes[0], curves["freshness_p99"], t0, "p99 ")
    _lines(axes[0], curves["freshness_p50"], t0, "p50 ")
    axes[0].axhline(OBJECTIVE_S, color="black", lw=0.8, ls=":", label="objective 30 s")
    axes[0].set(ylabel="freshness (s, 1 min)", yscale="log")
    _lines(axes[1], curves["lag"], t0)
    axes[1].set(ylabel="consumer lag (records)", yscale="symlog")
    _lines(axes[2], curves["intake_per_s"], t0, "intake ")
    _lines(axes[2], curves.get("committed_per_s", {}), t0, "committed to ")
    axes[2].set(ylabel="events /s")
    _lines(axes[3], curves["deliveries_per_s"], t0, "deliveries ")
    axes[3].set(ylabel="webhook deliveries /s")
    _rss(axes[4], samples, t0)
    axes[4].set(ylabel="RSS (MiB, process group)", xlabel="minutes since the load began", yscale="log")
    _faults(list(axes), faults, t0)
    for ax in axes:
        ax.legend(fontsize=6, loc="upper left", ncol=4)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
