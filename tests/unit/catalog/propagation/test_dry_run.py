"""The dry-run: the processor's walk over a loaded state, nearest first, changing nothing."""

from __future__ import annotations

import pytest

from catalog.propagation.dry_run import InvalidDryRun, check_request, dry_run
from catalog.propagation.graph import Limits
from catalog.propagation.tenant import TenantPropagation


def u(name: str) -> str:
    return f"urn:metalake:pg:prod/db/s/{name}/email"


def loaded() -> TenantPropagation:
    state = TenantPropagation("acme", Limits())
    for i, (a, b) in enumerate([("a", "c"), ("a", "b"), ("b", "d"), ("c", "d"), ("d", "gone")]):
        state.apply("lineage_edges", {"upstream": u(a), "urn": u(b), "version": i, "event_id": "l", "deleted": False})
    state.apply("assets", {"urn": u("gone"), "version": 1, "event_id": "a", "deleted": True})
    state.apply("classifications", {"urn": u("d"), "tag": "PII", "version": 1, "event_id": "c", "deleted": False})
    return state


def test_nearest_first_with_paths_and_what_already_holds_the_tag() -> None:
    state = loaded()
    before = (dict(state.rows), dict(state.assignments), len(state.graph))
    result = dry_run(state, u("a"), "PII")
    assert [(r.urn, r.depth, r.already_tagged) for r in result.reached] == [
        (u("b"), 1, False),
        (u("c"), 1, False),
        (u("d"), 2, True),
    ]
    assert result.reached[2].path == (u("a"), u("b"), u("d"))
    assert result.as_dict()["count"] == 3
    assert (dict(state.rows), dict(state.assignments), len(state.graph)) == before


def test_limits_apply() -> None:
    result = dry_run(loaded(), u("a"), "PII", Limits(max_depth=1))
    assert (len(result.reached), result.truncated, result.reason) == (2, True, "max_depth")


@pytest.mark.parametrize(("urn", "tag", "field"), [("nope", "PII", "urn"), (u("a"), "1bad", "tag")])
def test_impossible_requests_name_the_field(urn: str, tag: str, field: str) -> None:
    with pytest.raises(InvalidDryRun) as caught:
        check_request(urn, tag)
    assert caught.value.field == field
