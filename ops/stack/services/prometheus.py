"""Prometheus from Debian's ``prometheus`` package (deploy/local/fetch/prometheus.sh), scraping every metalake
process's ``/metrics`` (ops/stack/scrape_targets.py) and evaluating the repository's alert rules
(deploy/prometheus/rules/), on ``stack.ports.prometheus``.

Its configuration is generated at each start from the settings. ``/metrics`` asks for a bearer token
(``telemetry.metrics_token``): the stack generates one into ``stack.env`` (``manager.GENERATED_SECRETS``), and
Prometheus reads it from an owner-only file of its run folder; a token the environment names with
``METALAKE_TELEMETRY__METRICS_TOKEN_FILE`` is read from that file instead. Prometheus' own HTTP port (UI and query API)
listens on loopback only and asks for no credentials, like the stack's PostgreSQL (docs/operations.md#prometheus);
its admin and lifecycle APIs stay off. Configuration as JSON: every JSON document is a YAML one.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ops.stack.scrape_targets import targets
from ops.stack.services.base import Service, ServiceError, StackContext

TOKEN_VARIABLE = "METALAKE_TELEMETRY__METRICS_TOKEN"  # noqa: S105 - the variable's name, not a secret
#: Local: a short interval so an alert's ``for`` and a dashboard's rate react within seconds.
SCRAPE_INTERVAL = "10s"
RETENTION = "7d"


def rules_glob(repo_dir: Path) -> str:
    return str(repo_dir / "deploy" / "prometheus" / "rules" / "*.yml")


def scrape_config(ctx: StackContext, token_file: Path) -> dict[str, Any]:
    """Prometheus' configuration: itself, then one job per metalake process with the bearer token's file."""
    own = f"{ctx.host}:{ctx.settings.stack.ports.prometheus}"
    jobs: list[dict[str, Any]] = [{"job_name": "prometheus", "static_configs": [{"targets": [own]}]}]
    for job, target in targets(ctx.settings).items():
        jobs.append(
            {
                "job_name": job,
                "metrics_path": "/metrics",
                "authorization": {"type": "Bearer", "credentials_file": str(token_file)},
                "static_configs": [{"targets": [target]}],
            }
        )
    return {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "rule_files": [rules_glob(ctx.repo_dir)],
        "scrape_configs": jobs,
    }


def write_private(path: Path, text: str) -> None:
    """A file only its owner reads, created so (never briefly readable by others)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    path.chmod(0o600)


class Prometheus(Service):
    name = "prometheus"

    def ports(self, ctx: StackContext) -> list[int]:
        return [ctx.settings.stack.ports.prometheus]

    def fetch(self, ctx: StackContext) -> None:
        ctx.run_fetch_script("prometheus", self.name)

    def binary(self, ctx: StackContext, tool: str = "prometheus") -> Path:
        return ctx.cache_dir("prometheus") / "bin" / tool

    def token_file(self, ctx: StackContext) -> Path:
        named = os.environ.get(f"{TOKEN_VARIABLE}_FILE")
        return Path(named) if named else ctx.run_dir(self.name) / "metrics-token"

    def config_file(self, ctx: StackContext) -> Path:
        return ctx.run_dir(self.name) / "prometheus.json"

    def prepare(self, ctx: StackContext) -> None:
        run = ctx.run_dir(self.name)
        run.mkdir(parents=True, exist_ok=True)
        ctx.data_dir(self.name).mkdir(parents=True, exist_ok=True)
        token_file = self.token_file(ctx)
        if not os.environ.get(f"{TOKEN_VARIABLE}_FILE"):
            token = ctx.generated_secret(TOKEN_VARIABLE)
            if token is None:
                raise ServiceError(f"prometheus: no {TOKEN_VARIABLE} in the environment or in stack.env")
            write_private(token_file, token)
        self.config_file(ctx).write_text(json.dumps(scrape_config(ctx, token_file), indent=2) + "\n")

    def argv(self, ctx: StackContext) -> list[str]:
        return [
            str(self.binary(ctx)),
            f"--config.file={self.config_file(ctx)}",
            f"--storage.tsdb.path={ctx.data_dir(self.name)}",
            f"--storage.tsdb.retention.time={RETENTION}",
            f"--web.listen-address={ctx.host}:{ctx.settings.stack.ports.prometheus}",
            # The UI's templates and scripts, unpacked from the Debian packages (they default to /usr/share).
            f"--web.local-assets={ctx.cache_dir('prometheus') / 'root' / 'usr' / 'share' / 'prometheus' / 'web'}",
        ]

    def url(self, ctx: StackContext) -> str:
        return f"http://{ctx.host}:{ctx.settings.stack.ports.prometheus}"

    def probe(self, ctx: StackContext) -> str | None:
        try:
            # The URL is built from settings (loopback by default), not from user input.
            with urllib.request.urlopen(f"{self.url(ctx)}/-/ready", timeout=5) as resp:  # noqa: S310
                return None if resp.status == 200 else f"/-/ready answered {resp.status}"
        except urllib.error.HTTPError as exc:
            return f"/-/ready answered {exc.code}"
        except OSError as exc:
            return f"/-/ready unreachable ({type(exc).__name__})"
