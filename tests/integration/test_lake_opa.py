"""``access.mode=opa`` on a real Trino: a second lake Trino (the stack's distribution and lake, plain HTTP on
loopback, users named by header) with the rules file that names no tenant and Trino's OPA access control asking the
access processor's decision server (in this process, on the real control plane). Each tenant's users reach only its
own schema, its tagged column masked for the plain user and clear for the PII user; listings hide the other schemas;
a suspended tenant's users run nothing; the service user keeps everything.

The session's stack Trino keeps ``access.mode=rules`` (test_trino_access covers it): this Trino reads the same lake
and file metastore, so tables the stack registers are its tables too.
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from pymongo import MongoClient

from ops.settings import Settings
from ops.stack.lake_storage import trino_file_system
from ops.stack.manager import StackManager
from processors.access.decisions import DecisionServer, LakeDecisions
from tenants.access.rules import build_shared_rules, write_rules
from tenants.access.settings import DecisionSettings
from tenants.access.sync import AccessSync
from tenants.model import Tier
from tenants.naming import CONTROL_DATABASE, names_for, trino_user
from tenants.registry import TenantRegistry, TenantState
from tests._support.accessit import EMAILS, drop_schema, make_data_table
from tests._support.customer_trino import CustomerTrino
from tests._support.itest import wait_for
from tests._support.trinoschema import schema_of

pytestmark = pytest.mark.integration

KEY = secrets.token_urlsafe(24)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _opa_settings(settings: Settings) -> Settings:
    decisions = DecisionSettings(key=SecretStr(KEY), host="127.0.0.1", port=0, cache_ttl_s=0.5)
    access = settings.access.model_copy(update={"mode": "opa", "decisions": decisions})
    return settings.model_copy(update={"access": access})


def _plugins(settings: Settings, workdir: Path) -> Path:
    """The Delta connector from the server's plugins and the OPA plugin kept beside them."""
    cache = settings.local_stack_dir / "cache" / "trino"
    plugins = workdir / "plugin"
    plugins.mkdir(parents=True)
    (plugins / "delta-lake").symlink_to(cache / "server" / "plugin" / "delta-lake", target_is_directory=True)
    (plugins / "opa").symlink_to(cache / "extra-plugins" / "opa", target_is_directory=True)
    return plugins


@pytest.fixture(scope="module")
def lake_opa(
    settings: Settings,
    stack: StackManager,
    mongo: MongoClient[dict[str, Any]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[CustomerTrino]:
    opa_settings = _opa_settings(settings)
    server = DecisionServer(LakeDecisions(opa_settings, mongo).answer, SecretStr(KEY), "127.0.0.1", 0).start()
    workdir = tmp_path_factory.mktemp("lake-opa")
    rules = workdir / "rules.json"
    write_rules(rules, build_shared_rules(["metalake", "metalake-tests"], catalog=settings.trino.catalog))
    base = f"http://127.0.0.1:{server.port}/v1/opa/lake/{KEY}"
    files = {
        "config.properties": "access-control.config-files=etc/rules-access-control.properties,etc/opa.properties",
        "rules-access-control.properties": f"access-control.name=file\nsecurity.config-file={rules}\n",
        "opa.properties": "\n".join(
            [
                "access-control.name=opa",
                f"opa.policy.uri={base}/allow",
                f"opa.policy.batched-uri={base}/batch",
                f"opa.policy.batch-column-masking-uri={base}/column-masks",
                "",
            ]
        ),
    }
    lake = "\n".join(["connector.name=delta_lake", "hive.metastore=file", *_local_lake(settings), ""])
    trino = CustomerTrino(
        settings,
        workdir,
        port=_free_port(),
        database="",
        access_control=None,
        files=files,
        plugins=_plugins(settings, workdir),
        catalogs={settings.trino.catalog: lake},
        probe_user="metalake",
    )
    try:
        trino.start().wait_ready(timeout_s=240)
        yield trino
    finally:
        trino.stop()
        server.close()


def _local_lake(settings: Settings) -> list[str]:
    # The stack's local lake and metastore only (no S3 store): what the tables of this test live in.
    lines = trino_file_system(settings, settings.lake.s3.model_copy(update={"endpoint": None}))
    return [line for line in lines if not line.startswith(("fs.native-s3", "s3."))]


def test_each_tenants_users_reach_only_its_schema_masked_by_the_decisions(
    settings: Settings, lake_opa: CustomerTrino, trino_cursor: Any, mongo: MongoClient[dict[str, Any]]
) -> None:
    registry = TenantRegistry(mongo[CONTROL_DATABASE])
    mine, other = f"it-{secrets.token_hex(4)}", f"it-{secrets.token_hex(4)}"
    names = [names_for(t, settings.lake_root, dedicated=True) for t in (mine, other)]
    try:
        for n in names:
            registry.create(n.tenant_id, Tier.POOLED)
            registry.set_state(n.tenant_id, TenantState.ACTIVE)
            make_data_table(settings, trino_cursor, n, "people")
        column = f"urn:metalake:trino:{settings.access.trino_instance}/lake/{schema_of(names[0])}/people/email"
        mongo[names[0].mongo_database]["classifications"].update_one(
            {"_id": f"{column}|PII"},
            {"$set": {"urn": column, "tag": "PII", "source": "human", "deleted": False, "version": 1}},
            upsert=True,
        )
        AccessSync(_opa_settings(settings), mongo).refresh(mine)
        check_isolation(lake_opa, schema_of(names[0]), schema_of(names[1]), mine)
        registry.set_state(mine, TenantState.SUSPENDED)
        plain = trino_user(mine)
        wait_for("the suspended tenant refused", lambda: lake_opa.query(plain, "SELECT 1") == "PERMISSION_DENIED", 10)
        own = f'SELECT count(*) FROM lake."{schema_of(names[0])}".people'
        assert lake_opa.query(trino_user(mine, pii=True, admin=True), own) == "PERMISSION_DENIED"
        assert lake_opa.query("metalake", own) == [[2]]
    finally:
        for n in names:
            drop_schema(settings, trino_cursor, n)
            registry.delete(n.tenant_id)
            mongo.drop_database(n.mongo_database)
            mongo[CONTROL_DATABASE]["trino_access"].delete_one({"_id": n.tenant_id})


def check_isolation(trino: CustomerTrino, schema: str, other_schema: str, tenant: str) -> None:
    plain, pii, admin = trino_user(tenant), trino_user(tenant, pii=True), trino_user(tenant, admin=True)
    own = f'SELECT email, name FROM lake."{schema}".people ORDER BY id'
    assert trino.query(plain, own) == [["****", "name-1"], ["****", "name-2"]]
    assert trino.query(admin, own) == [["****", "name-1"], ["****", "name-2"]]
    assert trino.query(pii, own) == [[EMAILS[0], "name-1"], [EMAILS[1], "name-2"]]
    for user in (plain, pii):
        assert trino.query(user, f'SELECT * FROM lake."{other_schema}".people') == "PERMISSION_DENIED"
        assert trino.query(user, f'SELECT * FROM lake."{schema}"."people$history"') == "PERMISSION_DENIED"
        listed = trino.query(user, "SHOW SCHEMAS FROM lake")
        assert isinstance(listed, list)
        schemas = {row[0] for row in listed}
        assert schemas == {schema}  # as the rules file lists it: not information_schema, nor another schema
        tables = f"SELECT table_name FROM lake.information_schema.tables WHERE table_schema = '{other_schema}'"
        assert trino.query(user, tables) == []
    assert trino.query("metalake", f'SELECT count(*) FROM lake."{other_schema}".people') == [[2]]
