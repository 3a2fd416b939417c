"""The interface every local-stack service implements, and the paths it may use."""

from __future__ import annotations

import os
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from ops.settings import Settings


class ServiceError(RuntimeError):
    """A service could not be fetched, configured or started; the message names the cause and the log."""


@dataclass(frozen=True)
class StackContext:
    settings: Settings
    repo_dir: Path

    @property
    def stack_dir(self) -> Path:
        return self.settings.local_stack_dir

    @property
    def host(self) -> str:
        return self.settings.stack.host

    def generated_secret(self, variable: str) -> str | None:
        """A secret the stack generated into ``stack.env`` (``manager.GENERATED_SECRETS``); the settings loaded
        before this ``up`` wrote the file may not hold it yet. The environment wins, as it does for every process."""
        if os.environ.get(variable):
            return os.environ[variable]
        env_file = self.stack_dir / "stack.env"
        if not env_file.is_file():
            return None
        for line in env_file.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and key == variable and value:
                return value
        return None

    def run_dir(self, service: str) -> Path:
        return self.stack_dir / "run" / service

    def data_dir(self, service: str) -> Path:
        return self.stack_dir / "data" / service

    def cache_dir(self, service: str) -> Path:
        return self.stack_dir / "cache" / service

    def log_file(self, service: str) -> Path:
        return self.stack_dir / "logs" / f"{service}.log"

    def fetch_log(self, service: str) -> Path:
        return self.stack_dir / "logs" / f"fetch-{service}.log"

    def run_fetch_script(self, script: str, service: str, timeout_s: float = 1800) -> None:
        """Run deploy/local/fetch/<script>.sh; on failure name the service and its log."""
        log = self.fetch_log(service)
        log.parent.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "STACK_DIR": str(self.stack_dir),
            "REPO_DIR": str(self.repo_dir),
            "PYTHON": os.environ.get("METALAKE_PYTHON", _python()),
        }
        path = self.repo_dir / "deploy" / "local" / "fetch" / f"{script}.sh"
        with log.open("ab") as out:
            try:
                result = subprocess.run(
                    ["bash", str(path)], stdout=out, stderr=subprocess.STDOUT, env=env, timeout=timeout_s, check=False
                )
            except subprocess.TimeoutExpired:
                raise ServiceError(f"{service}: fetch timed out after {timeout_s:.0f}s; see {log}") from None
        if result.returncode != 0:
            raise ServiceError(f"{service}: fetch/build failed (exit {result.returncode}); see {log}")


def _python() -> str:
    import sys

    return sys.executable


class Service(ABC):
    """A process the stack runs. Implementations hold no state: everything derives from the context."""

    name: str
    #: False for things the stack starts only on request (the streaming job).
    infrastructure: bool = True
    #: True for the processors and the API, started only by ``up --with-processors`` (or by name).
    processor: bool = False
    #: Services that must be running before this one starts (started with it, stopped after it).
    requires: tuple[str, ...] = ()

    def companions(self, ctx: StackContext) -> tuple[str, ...]:
        """Services this one cannot answer without once it runs, started with it (after it, in the stack's order)."""
        return ()

    def needs_at_start(self, ctx: StackContext) -> tuple[str, ...]:
        """Services that must be up when this one starts, beyond :attr:`requires` (started before it, but not
        stopped with it: it needs them only to start)."""
        return ()

    def started_by_default(self, ctx: StackContext) -> bool:
        """Whether ``up`` without names starts this infrastructure service (SeaweedFS: only for a lake on S3; the
        Spark standalone cluster: never, only when named)."""
        return True

    @abstractmethod
    def ports(self, ctx: StackContext) -> list[int]:
        """Loopback ports the service listens on; each must be free before start."""

    def port_variable(self) -> str:
        """The environment variable that moves the service's port (named when the port is taken)."""
        return f"METALAKE_STACK__PORTS__{self.name.upper()}"

    @abstractmethod
    def fetch(self, ctx: StackContext) -> None:
        """Download or build what the service needs into the cache; idempotent and quick when cached."""

    def prepare(self, ctx: StackContext) -> None:  # noqa: B027 - optional hook, a no-op unless overridden
        """Write configuration and initialise data directories; idempotent."""

    @abstractmethod
    def argv(self, ctx: StackContext) -> list[str]:
        """The command line that runs the service in the foreground."""

    def env(self, ctx: StackContext) -> dict[str, str]:
        return dict(os.environ)

    def cwd(self, ctx: StackContext) -> Path:
        return ctx.run_dir(self.name)

    @abstractmethod
    def probe(self, ctx: StackContext) -> str | None:
        """None when the service answers as it should, else what is wrong."""

    def start_timeout_s(self, ctx: StackContext) -> float:
        return ctx.settings.stack.start_timeout_s
