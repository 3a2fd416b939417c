from __future__ import annotations

import pytest

from catalog.projection import escape_keys, unescape_keys

NAMES = ["spark.app.name", "$ref", "a$b", "100%", "%2E", "a.b%2Ec", "nul\x00here", "plain", "", "\uff0e"]


@pytest.mark.parametrize("name", NAMES)
def test_a_name_survives_the_round_trip(name: str) -> None:
    assert unescape_keys(escape_keys({name: "v"})) == {name: "v"}


@pytest.mark.parametrize("name", NAMES)
def test_an_escaped_name_is_storable(name: str) -> None:
    (escaped,) = escape_keys({name: "v"})
    assert "." not in escaped and not escaped.startswith("$") and "\x00" not in escaped


def test_distinct_names_stay_distinct() -> None:
    values = {name: str(i) for i, name in enumerate(NAMES)}
    assert len(escape_keys(values)) == len(values)
    assert unescape_keys(escape_keys(values)) == values
