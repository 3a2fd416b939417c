"""The demo's steps and waits: numbered with timings; a wait that times out names what and which logs to read."""

from __future__ import annotations

import re

import pytest

from ops.demo.flow import DemoError, Steps, wait_for


def test_a_wait_that_times_out_names_what_did_not_arrive_and_the_logs() -> None:
    lines: list[str] = []
    with pytest.raises(DemoError) as err:
        wait_for("webhooks classification.added", lambda: None, 0.6, "outbound propagation", lines.append)
    assert str(err.value) == (
        "webhooks classification.added: did not arrive within 1s. Check `metalake stack status` and read "
        "`metalake stack logs outbound` and `metalake stack logs propagation`"
    )
    assert lines == []


def test_a_wait_returns_what_arrived_and_says_when() -> None:
    polls = iter([None, False, {"state": "active"}])
    lines: list[str] = []
    assert wait_for("tenant active", lambda: next(polls), 10, "api", lines.append) == {"state": "active"}
    assert len(lines) == 1 and re.fullmatch(r"    tenant active: after \d+\.\ds", lines[0])


def test_steps_are_numbered_and_timed() -> None:
    lines: list[str] = []
    steps = Steps(lines.append)
    with steps.step("first"):
        pass
    with steps.step("second"):
        pass
    assert lines[0] == "\n[1] first" and lines[2] == "\n[2] second"
    assert re.fullmatch(r"    \(\d+\.\ds\)", lines[1]) and re.fullmatch(r"    \(\d+\.\ds\)", lines[3])


def test_the_lineage_wait_goes_on_while_the_upstream_column_is_not_projected_yet() -> None:
    # Under load the downstream column (the one the demo waits for) reached MongoDB before the upstream one, whose
    # lineage then answered 404 and ended `make demo` (2026-11-29).
    import httpx

    from ops.demo.api_client import ApiClient
    from ops.demo.flow import downstream_edges

    answers = iter(
        [
            httpx.Response(404, json={"detail": "no such asset"}),
            httpx.Response(200, json={"edges": []}),
            httpx.Response(200, json={"edges": [{"from": "a", "to": "b"}]}),
        ]
    )
    api = ApiClient("http://api.test")
    api._http = httpx.Client(base_url="http://api.test", transport=httpx.MockTransport(lambda _: next(answers)))
    assert downstream_edges(api, "acme", "urn:a") is None
    assert downstream_edges(api, "acme", "urn:a") is None
    assert downstream_edges(api, "acme", "urn:a") == {"edges": [{"from": "a", "to": "b"}]}
