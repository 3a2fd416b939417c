"""The soak's summary: one JSON document (everything measured) and its markdown (the tables of docs/benchmarks.md)."""

from __future__ import annotations

from typing import Any

from soak.load import MAX_QUEUED

GOALS = "nothing lost or doubled in Delta, MongoDB and the deliveries; freshness p99 < 30 s again after each fault"


def _load_table(s: dict[str, Any]) -> list[str]:
    load = s["load"]
    return [
        "| load | value |",
        "|---|---|",
        f"| rate asked / accepted (mean over the run) | {s['args']['rate']:g} / "
        f"{load['accepted_per_s']:.1f} events/s |",
        f"| events accepted (ingest API) / rejected / unsent | {load['accepted']} / {load['rejected']} / "
        f"{load['unsent']} |",
        f"| events not sent because the intake was behind (over {MAX_QUEUED} requests queued) | {load['skipped']} |",
        f"| requests resent (refused connection, timeout, 429, 5xx) | {load['resends']} |",
        f"| Monte Carlo incidents accepted | {load['incidents']} |",
        f"| answers by status | {load['statuses']} |",
        f"| load average (1 min) mean / max | {s['load_average']['mean']} / {s['load_average']['max']} |",
    ]


def _checks_table(c: dict[str, Any]) -> list[str]:
    h, d, m, i, w = (
        c[k] for k in ("delta_history", "delta_current", "mongodb_current", "incidents_delta", "deliveries")
    )
    return [
        "| check (per event id) | expected | lost | duplicated | notes |",
        "|---|---|---|---|---|",
        f"| Delta `events` (history) | {h['accepted']} | {h['lost']} | {h['duplicated']} | "
        f"{h['duplicated_after_client_resend']} of the duplicates were resent by the client after a lost answer; "
        f"{h['unexpected']} unexpected |",
        f"| Delta `assets` (newest version) | {d['assets']} | {d['missing']} | - | {d['stale']} stale |",
        f"| MongoDB `assets` (newest version) | {m['assets']} | {m['missing']} | - | {m['stale']} stale |",
        f"| Delta `incidents` (Monte Carlo) | {i['accepted']} | {i['lost']} | {i['duplicated']} | |",
        f"| webhook deliveries (per change) | {w['expected']} | {w['lost']} | {w['duplicated']} | "
        f"{w['duplicate_receipts']} extra receipts; {w['from_before_the_run']} of changes from before the run |",
        f"\ndrain: {c['drain']['seconds']} s ({'settled' if c['drain']['settled'] else 'NOT settled: timed out'})",
    ]


def _faults_table(faults: list[dict[str, Any]], t0: float) -> list[str]:
    out = [
        "| at (min) | fault | back after (s) | p99 peak (s) | p99 < 30 s again after (s) | per store (s) | how |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in faults:
        back = "-" if f["back"] is None else f"{f['back'] - f['at']:.0f}"
        peak = "-" if f["p99_peak_s"] is None else f"{f['p99_peak_s']:.1f}"
        again = _again(f["under_objective_after_s"])
        stores = ", ".join(f"{store} {_again(s)}" for store, s in f.get("by_store", {}).items())
        cells = [f"{(f['at'] - t0) / 60:.1f}", f["kind"], back, peak, again, stores, "; ".join(f["notes"])]
        out.append("| " + " | ".join(cells) + " |")
    return out


def _again(seconds: float | None) -> str:
    return "not before the next fault" if seconds is None else f"{seconds:.0f}"


def _memory_table(memory: dict[str, dict[str, Any]]) -> list[str]:
    out = [
        "| process | start MiB | end MiB | max MiB | restarts | slope MiB/h (last process, over min) |",
        "|---|---|---|---|---|---|",
    ]
    for name, m in memory.items():
        slope = "-" if m["slope_mib_per_h"] is None else f"{m['slope_mib_per_h']:+.1f} ({m['slope_over_min']:.0f})"
        out.append(f"| {name} | {m['start_mib']} | {m['end_mib']} | {m['max_mib']} | {m['restarts']} | {slope} |")
    return out


def _exits(exits: list[dict[str, Any]], t0: float) -> list[str]:
    if not exits:
        return ["No process exited but those the faults killed."]
    out = ["| at (min) | process exited unplanned | its last error | restarted |", "|---|---|---|---|"]
    for e in exits:
        out.append(f"| {(e['at'] - t0) / 60:.1f} | {e['service']} | `{e['error']}` | {e['restarted']} |")
    return out


def markdown(s: dict[str, Any]) -> str:
    parts = [
        f"Soak of {s['date']}: `{s['command']}` ({s['machine']}); goals: {GOALS}.",
        "\n".join(_load_table(s)),
        "\n".join(_checks_table(s["checks"])),
        "\n".join(_faults_table(s["faults"], s["t0"])),
        "\n".join(_memory_table(s["memory"])),
        "\n".join(_exits(s.get("unplanned_exits", []), s["t0"])),
    ]
    return "\n\n".join(parts) + "\n"
