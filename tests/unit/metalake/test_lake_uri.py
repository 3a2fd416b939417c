"""A lake root is a local folder or an S3 location; names build the same way on both, and each engine gets its
own spelling (Spark s3a://, delta-rs and Trino s3://)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import SecretStr

from metalake.lake_settings import LakeS3Settings
from metalake.lake_uri import NotOnLocalDisk, S3Path, delta_rs_uri, lake_root_of, local_path, spark_uri
from metalake.s3 import delta_rs_storage_options, lake_storage_options
from ops.settings import Settings
from processors.enrichment.tables import Layout
from tenants.naming import names_for, platform_audit_dir, pooled_table_path


def test_s3_uris_parse_and_join_like_paths() -> None:
    root = S3Path.parse("s3a://lake-bucket/prod/lake/")
    assert str(root) == "s3a://lake-bucket/prod/lake"
    assert (root.bucket, root.key) == ("lake-bucket", "prod/lake")
    assert S3Path.parse("s3://lake-bucket/prod/lake") == root
    table = root / "_pooled" / "events"
    assert isinstance(table, S3Path)
    assert str(table) == "s3a://lake-bucket/prod/lake/_pooled/events"
    assert table.uri("s3") == "s3://lake-bucket/prod/lake/_pooled/events"
    assert str(table.relative_to(root)) == "_pooled/events"
    assert S3Path.parse("s3a://only-bucket").key == ""
    assert str(S3Path.parse("s3a://only-bucket") / "t") == "s3a://only-bucket/t"


@pytest.mark.parametrize(
    "bad", ["s3a://", "s3a:///prefix", "s3a://bkt/../x", "s3a://bkt/./x", "s3a://Bad_Bucket/x", "http://bkt/x"]
)
def test_malformed_s3_uris_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        S3Path.parse(bad)


def test_an_s3_location_is_never_taken_for_a_local_file() -> None:
    with pytest.raises(TypeError):
        os.fspath(S3Path.parse("s3a://bkt/lake"))
    with pytest.raises(NotOnLocalDisk, match=r"metalake lake maintain needs .* s3a://bkt/lake"):
        local_path(S3Path.parse("s3a://bkt/lake"), "metalake lake maintain")


def test_settings_take_a_folder_or_an_s3_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METALAKE_LAKE__ROOT", "s3a://metalake/lake")
    monkeypatch.setenv("METALAKE_LAKE__S3__SECRET_ACCESS_KEY", "not-in-repr")
    settings = Settings()
    assert settings.lake_root == S3Path.parse("s3a://metalake/lake")
    assert settings.lake_on_s3
    assert "not-in-repr" not in repr(settings)
    monkeypatch.setenv("METALAKE_LAKE__ROOT", str(tmp_path / "lake" / ".." / "lake"))
    local = Settings()
    assert local.lake_root == tmp_path / "lake"
    assert not local.lake_on_s3
    assert lake_storage_options(local) is None


def test_registry_roots_read_back_as_stored() -> None:
    assert lake_root_of("s3a://bkt/tenants/x") == S3Path.parse("s3a://bkt/tenants/x")
    assert lake_root_of("/data/lake") == Path("/data/lake")


def test_every_name_of_a_tenant_follows_an_s3_root() -> None:
    root = S3Path.parse("s3a://bkt/lake")
    names = names_for("acme", root)
    assert str(names.table("assets").path) == "s3a://bkt/lake/_pooled/assets"
    assert str(names.delta_path("audit")) == "s3a://bkt/lake/acme/audit"
    assert str(platform_audit_dir(root)) == "s3a://bkt/lake/_platform/audit"
    assert str(pooled_table_path(root, "events")) == "s3a://bkt/lake/_pooled/events"
    # What the streaming job hands to Spark: s3a URIs, the pooled tables and the unrouted dead letters alike.
    layout = Layout(root)
    assert layout.path("events") == "s3a://bkt/lake/_pooled/events"
    assert layout.unrouted_dlq == "s3a://bkt/lake/_unrouted/_dlq"
    assert Layout(root, names_for("acme", root, dedicated=True)).path("events") == "s3a://bkt/lake/acme/events"
    assert spark_uri(root) == "s3a://bkt/lake"
    assert delta_rs_uri(root / "acme" / "audit") == "s3://bkt/lake/acme/audit"
    assert delta_rs_uri(Path("/data/lake")) == "/data/lake"


def test_delta_rs_options_name_the_store_and_its_keys() -> None:
    s3 = LakeS3Settings(
        endpoint="http://127.0.0.1:8333",
        region="eu-west-1",
        access_key_id=SecretStr("AK"),
        secret_access_key=SecretStr("SK"),
    )
    assert delta_rs_storage_options(s3) == {
        "AWS_REGION": "eu-west-1",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        "conditional_put": "etag",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:8333",
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "AK",
        "AWS_SECRET_ACCESS_KEY": "SK",
    }
    # AWS itself: no endpoint, TLS, the default credential chain.
    aws = delta_rs_storage_options(LakeS3Settings(path_style=False))
    assert "AWS_ENDPOINT_URL" not in aws and "AWS_ACCESS_KEY_ID" not in aws
    assert aws["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] == "true"


def test_an_s3_folder_is_its_key_prefix_with_a_slash() -> None:
    # What listings and deletions of a tenant's objects use: "lake/acme/" never matches "lake/acme2/...".
    root = S3Path.parse("s3a://bkt/lake")
    assert (root / "acme").folder == "lake/acme/"
    assert S3Path.parse("s3://bkt").folder == ""
