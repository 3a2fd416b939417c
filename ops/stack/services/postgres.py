"""PostgreSQL from Debian: FerretDB's storage (database ``ferretdb``) and a real source for the catalog crawler. Runs as
the ``postgres`` user when we are root."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

from ops.stack.health import tcp_probe
from ops.stack.services.base import Service, ServiceError, StackContext

SUPERUSER = "metalake"


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise ServiceError("postgres: no server binary under /usr/lib/postgresql; run: apt-get install postgresql")
    return Path(found[-1]).parent


def psql_path() -> Path:
    """The psql of the same PostgreSQL version as the server."""
    return _bin_dir() / "psql"


def _as_postgres_user(argv: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: drop to the Debian ``postgres`` user with setpriv (which execs)."""
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise ServiceError("postgres: running as root needs setpriv (util-linux) to drop to the postgres user")
    return [setpriv, "--reuid=postgres", "--regid=postgres", "--init-groups", "--", *argv]


class Postgres(Service):
    name = "postgres"

    def ports(self, ctx: StackContext) -> list[int]:
        return [ctx.settings.stack.ports.postgres]

    def fetch(self, ctx: StackContext) -> None:
        ctx.run_fetch_script("postgres", self.name)

    def _datadir(self, ctx: StackContext) -> Path:
        return ctx.data_dir(self.name) / "pgdata"

    def prepare(self, ctx: StackContext) -> None:
        run, datadir = ctx.run_dir(self.name), self._datadir(ctx)
        run.mkdir(parents=True, exist_ok=True)
        if (datadir / "PG_VERSION").exists():
            return
        datadir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(datadir, "postgres", "postgres")
            shutil.chown(run, "postgres", "postgres")
        log = ctx.log_file(self.name)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            result = subprocess.run(
                _as_postgres_user(
                    [str(_bin_dir() / "initdb"), "-D", str(datadir), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8"]
                ),
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=120,
                check=False,
            )
        if result.returncode != 0:
            raise ServiceError(f"postgres: initdb failed (exit {result.returncode}); see {log}")

    def argv(self, ctx: StackContext) -> list[str]:
        return _as_postgres_user(
            [
                str(_bin_dir() / "postgres"),
                "-D",
                str(self._datadir(ctx)),
                "-p",
                str(ctx.settings.stack.ports.postgres),
                "-c",
                f"listen_addresses={ctx.host}",
                "-c",
                f"unix_socket_directories={ctx.run_dir(self.name)}",
            ]
        )

    def probe(self, ctx: StackContext) -> str | None:
        return tcp_probe(ctx.host, ctx.settings.stack.ports.postgres)
