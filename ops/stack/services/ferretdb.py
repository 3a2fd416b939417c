"""FerretDB v1 with its PostgreSQL backend on the stack's PostgreSQL: the MongoDB wire protocol, built from the Go
module proxy.

Before FerretDB starts, ``prepare`` makes sure its database exists with a locale FerretDB accepts and installs the
event trigger that gives every collection's table a GIN index FerretDB's pushed-down filters can use
(``deploy/local/ferretdb/*.sql``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from ops.stack.health import mongo_probe
from ops.stack.services.base import Service, ServiceError, StackContext
from ops.stack.services.postgres import SUPERUSER, psql_path

#: The PostgreSQL database that holds every MongoDB database (one schema each).
DATABASE = "ferretdb"
# Where the list of databases is read and CREATE DATABASE runs.
MAINTENANCE_DATABASE = "postgres"


def postgresql_url(host: str, port: int, database: str = DATABASE) -> str:
    """FerretDB's PostgreSQL URL: the stack's superuser over loopback (trust auth, so no password)."""
    return f"postgres://{SUPERUSER}@{host}:{port}/{database}"


def psql_argv(psql: Path, host: str, port: int, database: str, script: Path) -> list[str]:
    """psql running ``script`` in ``database``, stopping at the first error; ``db`` names FerretDB's database."""
    return [
        str(psql),
        "--no-psqlrc",
        "--quiet",
        "--set=ON_ERROR_STOP=1",
        f"--set=db={DATABASE}",
        f"--host={host}",
        f"--port={port}",
        f"--username={SUPERUSER}",
        f"--dbname={database}",
        f"--file={script}",
    ]


class FerretDB(Service):
    name = "ferretdb"
    requires = ("postgres",)

    def ports(self, ctx: StackContext) -> list[int]:
        return [ctx.settings.stack.ports.ferretdb]

    def fetch(self, ctx: StackContext) -> None:
        ctx.run_fetch_script("ferretdb", self.name)

    def prepare(self, ctx: StackContext) -> None:
        ctx.run_dir(self.name).mkdir(parents=True, exist_ok=True)
        sql = ctx.repo_dir / "deploy" / "local" / "ferretdb"
        # The database first (from the maintenance database), then the trigger inside it.
        self._psql(ctx, MAINTENANCE_DATABASE, sql / "database.sql")
        self._psql(ctx, DATABASE, sql / "indexes.sql")

    def _psql(self, ctx: StackContext, database: str, script: Path) -> None:
        log = ctx.log_file(self.name)
        log.parent.mkdir(parents=True, exist_ok=True)
        argv = psql_argv(psql_path(), ctx.host, ctx.settings.stack.ports.postgres, database, script)
        with log.open("ab") as out:
            try:
                result = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=120, check=False)
            except subprocess.TimeoutExpired:
                raise ServiceError(f"ferretdb: {script.name} timed out in PostgreSQL; see {log}") from None
        if result.returncode != 0:
            raise ServiceError(
                f"ferretdb: {script.name} failed in PostgreSQL database {database!r} (exit {result.returncode}; is "
                f"postgres up? metalake stack up postgres); see {log}"
            )

    def argv(self, ctx: StackContext) -> list[str]:
        return [
            str(ctx.cache_dir("ferretdb") / "ferretdb-run"),
            f"--listen-addr={ctx.host}:{ctx.settings.stack.ports.ferretdb}",
            f"--postgresql-url={postgresql_url(ctx.host, ctx.settings.stack.ports.postgres)}",
        ]

    def probe(self, ctx: StackContext) -> str | None:
        return mongo_probe(ctx.settings.mongo_uri)
