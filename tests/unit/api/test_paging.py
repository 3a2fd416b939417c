"""Opaque cursors: round trip, and every malformed or foreign cursor refused as a 400 problem naming ``cursor``."""

from __future__ import annotations

import base64
import json

import pytest

from api.paging import decode_cursor, encode_cursor
from api.problems import Problem


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_a_cursor_round_trips_keys_with_any_characters() -> None:
    key = ("orders ü/|=&", "urn:metalake:pg:x/db/s/t")
    assert decode_cursor("assets.name", encode_cursor("assets.name", key), 2) == key


def test_no_cursor_means_the_first_page() -> None:
    assert decode_cursor("incidents", None, 1) is None


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64 !!",
        _b64(b"not json"),
        _b64(b"[1, 2]"),
        _b64(json.dumps({"k": "incidents", "v": ["a"]}).encode()),  # another listing's cursor
        _b64(json.dumps({"k": "assets.name", "v": ["only-one"]}).encode()),  # wrong arity
        _b64(json.dumps({"k": "assets.name", "v": ["a", 3]}).encode()),  # not strings
        _b64(json.dumps({"k": "assets.name"}).encode()),
        "",
    ],
)
def test_a_bad_cursor_is_a_400_naming_the_field(cursor: str) -> None:
    with pytest.raises(Problem) as caught:
        decode_cursor("assets.name", cursor, 2)
    assert (caught.value.status, caught.value.field) == (400, "cursor")
    assert cursor == "" or cursor not in caught.value.detail
