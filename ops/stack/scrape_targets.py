"""What the local stack's Prometheus scrapes: every process's ``/metrics``, by job (the stack's service name, the
``job`` label every series carries; the Helm chart's PodMonitor names its jobs the same).

The processors serve ``/metrics`` on their health server, which is off unless ``health.ports.<process>`` is set: the
stack gives each process it runs its own port (``stack.ports.<process>_health``, unless the environment sets
``METALAKE_HEALTH__PORTS__<PROCESS>``), in that process's environment only. ``stack.env`` never names one: a
process a test starts with the stack's settings would find the port taken, and a health port that cannot be bound
stops the process. The admin API and the connector worker serve ``/metrics`` on their own port.
"""

from __future__ import annotations

from ops.settings import Settings

#: The stack's services whose ``/metrics`` is on their health server -> the health setting's process name.
HEALTH_PROCESS = {
    "stream": "enrichment",
    "lake-worker": "lake_worker",
    "propagation": "propagation",
    "outbound": "outbound",
    "access": "access",
}
#: Every job the local stack's Prometheus scrapes for metalake, in start order (the alert rules' ``up`` selector).
JOBS = ("api", "stream", "lake-worker", "propagation", "outbound", "access", "connect")
_WILDCARDS = ("0.0.0.0", "::", "")  # noqa: S104 - addresses a server binds, never bound here


def health_port(settings: Settings, service: str) -> int:
    """The health server's port of a stack-run process: its ``health.ports`` setting, else the stack's default."""
    process = HEALTH_PROCESS[service]
    set_port: int | None = getattr(settings.health.ports, process)
    if set_port:
        return set_port
    stack_port: int = getattr(settings.stack.ports, f"{process}_health")
    return stack_port


def health_port_variable(service: str) -> str:
    """The variable that moves a stack-run process's health port (named when the port is taken)."""
    return f"METALAKE_STACK__PORTS__{HEALTH_PROCESS[service].upper()}_HEALTH"


def health_env(settings: Settings, service: str) -> dict[str, str]:
    """The environment that turns a stack-run process's health server (and its ``/metrics``) on."""
    return {f"METALAKE_HEALTH__PORTS__{HEALTH_PROCESS[service].upper()}": str(health_port(settings, service))}


def targets(settings: Settings) -> dict[str, str]:
    """``host:port`` of each job's ``/metrics``."""

    def reachable(host: str) -> str:
        return settings.stack.host if host in _WILDCARDS else host

    out = {}
    for job in JOBS:
        if job == "api":
            out[job] = f"{reachable(settings.api.host)}:{settings.api.port}"
        elif job == "connect":
            out[job] = f"{reachable(settings.connect.host)}:{settings.connect.port}"
        else:
            out[job] = f"{reachable(settings.health.host)}:{health_port(settings, job)}"
    return out
