"""One way to read a JSON body: every failure is :class:`NotJson` saying why, a body nested too deeply included."""

from __future__ import annotations

import math

import pytest

from metalake.http.json_body import NESTED_TOO_DEEPLY, NotJson, loads


@pytest.mark.parametrize(
    ("body", "reason", "position"),
    [
        (b"[" * 100_000, NESTED_TOO_DEEPLY, None),  # RecursionError, no ValueError: it escaped as a 500
        (b'{"a": ', "JSONDecodeError", 6),
        (b"\xff\xfe\x00", "UnicodeDecodeError", None),
        (b'{"a": NaN}', "NaN is not a JSON number", None),
    ],
)
def test_every_failure_is_not_json_with_a_reason(body: bytes, reason: str, position: int | None) -> None:
    with pytest.raises(NotJson) as err:
        loads(body)
    assert (err.value.reason, err.value.position) == (reason, position)
    assert str(err.value).startswith(f"not JSON ({reason}")


def test_constants_only_when_asked_and_the_body_is_never_quoted() -> None:
    assert math.isnan(loads(b'{"a": NaN}', constants=True)["a"])
    with pytest.raises(NotJson) as err:
        loads(b'{"secret": "hunter2"')
    assert "hunter2" not in str(err.value)
