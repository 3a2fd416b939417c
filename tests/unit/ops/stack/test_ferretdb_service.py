"""FerretDB on the stack's PostgreSQL: the URL it is given, the psql runs that prepare its database, and the SQL."""

from __future__ import annotations

from pathlib import Path

from ops.settings import Settings
from ops.stack.paths import with_stack_paths
from ops.stack.services.base import StackContext
from ops.stack.services.ferretdb import DATABASE, FerretDB, postgresql_url, psql_argv
from ops.stack.services.postgres import SUPERUSER
from ops.stack.settings import StackPorts, StackSettings

REPO = Path(__file__).resolve().parents[4]
SQL = REPO / "deploy" / "local" / "ferretdb"


def test_ferretdb_runs_on_the_stack_postgres_database() -> None:
    ctx = StackContext(
        with_stack_paths(Settings(stack=StackSettings(dir=Path("/x/.stack"), ports=StackPorts(postgres=5999)))), REPO
    )
    argv = FerretDB().argv(ctx)
    assert argv[0] == "/x/.stack/cache/ferretdb/ferretdb-run"
    assert f"--postgresql-url=postgres://{SUPERUSER}@127.0.0.1:5999/{DATABASE}" in argv
    assert not any("sqlite" in arg for arg in argv)
    assert FerretDB.requires == ("postgres",)


def test_the_url_names_user_host_port_and_database() -> None:
    assert postgresql_url("127.0.0.1", 1234, "db") == f"postgres://{SUPERUSER}@127.0.0.1:1234/db"


def test_psql_stops_at_the_first_error_and_reads_no_user_config() -> None:
    argv = psql_argv(Path("/pg/bin/psql"), "127.0.0.1", 5999, "postgres", Path("/r/database.sql"))
    assert argv[0] == "/pg/bin/psql"
    assert {"--no-psqlrc", "--set=ON_ERROR_STOP=1", f"--set=db={DATABASE}", "--dbname=postgres"} <= set(argv)
    assert argv[-1] == "--file=/r/database.sql"


def test_the_database_has_a_locale_ferretdb_accepts_and_custom_plans() -> None:
    sql = (SQL / "database.sql").read_text()
    assert "LC_COLLATE %L LC_CTYPE %L TEMPLATE template0', :'db', 'UTF8', 'C.UTF-8', 'C.UTF-8'" in sql
    assert "WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db')" in sql  # idempotent
    assert 'ALTER DATABASE :"db" SET plan_cache_mode = force_custom_plan;' in sql


def test_the_trigger_indexes_id_and_urn_of_every_new_collection_table() -> None:
    sql = (SQL / "indexes.sql").read_text()
    assert "ON ddl_command_end WHEN TAG IN ('CREATE TABLE')" in sql
    assert "DROP EVENT TRIGGER IF EXISTS metalake_ferretdb_gin_indexes;" in sql  # idempotent re-runs
    assert "ARRAY['_id', 'urn', 'urn_keys']" in sql
    assert "USING gin ((_jsonb->%L)) WITH (fastupdate = off)" in sql
    assert "table_name = '_ferretdb_database_metadata'" in sql
