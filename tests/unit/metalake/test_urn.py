"""The asset URN scheme: formatting, percent-encoding round trips, kinds by depth, navigation, rejection."""

from __future__ import annotations

import pytest

from metalake.urn import AssetUrn, InvalidUrn, asset_urn


def test_str_of_a_plain_table() -> None:
    assert asset_urn("postgres", "prod", "shop", "public", "orders") == "urn:metalake:postgres:prod/shop/public/orders"


def test_special_characters_are_percent_encoded_in_every_segment() -> None:
    urn = asset_urn("pg", "prod:eu", "my db", "a/b", "c:d", "e%f")
    assert urn == "urn:metalake:pg:prod%3Aeu/my%20db/a%2Fb/c%3Ad/e%25f"


@pytest.mark.parametrize(
    ("instance", "path"),
    [
        ("prod", ("shop",)),
        ("prod", ("shop", "public", "orders", "id")),
        ("host:5432", ("db/with/slashes", "sch:ema", "table with spaces", "col")),
        ("a b", ("%41", "100%", "ünïcödé", "x?y#z&")),
        ("i", ("..", ".", "~", "+")),
    ],
)
def test_round_trip(instance: str, path: tuple[str, ...]) -> None:
    urn = AssetUrn("snowflake", instance, path)
    text = str(urn)
    parsed = AssetUrn.parse(text)
    assert parsed == urn
    assert parsed.instance == instance
    assert parsed.path == path
    assert str(parsed) == text


def test_parse_decodes_segments() -> None:
    urn = AssetUrn.parse("urn:metalake:pg:prod%3Aeu/my%20db/a%2Fb/c%3Ad/e%25f")
    assert urn.platform == "pg"
    assert urn.instance == "prod:eu"
    assert urn.path == ("my db", "a/b", "c:d", "e%f")


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        (("db",), "database"),
        (("db", "sch"), "schema"),
        (("db", "sch", "tbl"), "table"),
        (("db", "sch", "tbl", "col"), "column"),
    ],
)
def test_kind_follows_depth(path: tuple[str, ...], kind: str) -> None:
    urn = AssetUrn("pg", "prod", path)
    assert urn.kind == kind
    assert AssetUrn.parse(str(urn)).kind == kind


def test_name_and_qualified_name() -> None:
    urn = AssetUrn("pg", "prod", ("shop", "public", "order items"))
    assert urn.name == "order items"
    assert urn.qualified_name == "shop.public.order items"


def test_parent_chain_ends_at_the_database() -> None:
    column = AssetUrn.parse("urn:metalake:pg:prod/shop/public/orders/id")
    table = column.parent()
    assert table == AssetUrn("pg", "prod", ("shop", "public", "orders"))
    assert table is not None
    schema = table.parent()
    assert schema == AssetUrn("pg", "prod", ("shop", "public"))
    assert schema is not None
    database = schema.parent()
    assert database == AssetUrn("pg", "prod", ("shop",))
    assert database is not None
    assert database.parent() is None


def test_child_appends_a_segment_and_inverts_parent() -> None:
    table = AssetUrn("pg", "prod", ("shop", "public", "orders"))
    column = table.child("a/b c")
    assert column.kind == "column"
    assert str(column) == "urn:metalake:pg:prod/shop/public/orders/a%2Fb%20c"
    assert column.parent() == table


def test_a_column_has_no_children() -> None:
    column = AssetUrn("pg", "prod", ("shop", "public", "orders", "id"))
    with pytest.raises(InvalidUrn):
        column.child("deeper")


def test_child_name_must_not_be_empty() -> None:
    with pytest.raises(InvalidUrn):
        AssetUrn("pg", "prod", ("shop",)).child("")


def test_urns_are_hashable_values() -> None:
    a = AssetUrn.parse("urn:metalake:pg:prod/shop")
    b = AssetUrn("pg", "prod", ("shop",))
    assert {a: 1}[b] == 1


@pytest.mark.parametrize(
    "text",
    [
        "",
        "urn:other:pg:prod/db",
        "URN:METALAKE:pg:prod/db",
        "urn:metalake:pg",
        "urn:metalake:pg:prod",
        "urn:metalake:PG:prod/db",
        "urn:metalake:1pg:prod/db",
        "urn:metalake::prod/db",
        "urn:metalake:pg:/db",
        "urn:metalake:pg:prod/",
        "urn:metalake:pg:prod/db/",
        "urn:metalake:pg:prod/db//tbl",
        "urn:metalake:pg:prod/a/b/c/d/e",
        "urn:metalake:p.g:prod/db",
    ],
)
def test_invalid_urns_are_rejected(text: str) -> None:
    with pytest.raises(InvalidUrn):
        AssetUrn.parse(text)


def test_invalid_urn_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a metalake URN"):
        AssetUrn.parse("urn:other:x")


@pytest.mark.parametrize(
    ("platform", "instance", "path"),
    [
        ("pg", "", ("db",)),
        ("pg", "prod", ()),
        ("pg", "prod", ("db", "")),
        ("Pg", "prod", ("db",)),
        ("p" * 65, "prod", ("db",)),
    ],
)
def test_constructor_validates(platform: str, instance: str, path: tuple[str, ...]) -> None:
    with pytest.raises(InvalidUrn):
        AssetUrn(platform, instance, path)


def test_platform_of_64_characters_is_accepted() -> None:
    assert AssetUrn("p" * 64, "prod", ("db",)).platform == "p" * 64
