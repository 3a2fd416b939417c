"""Jira's connections go to the address the SSRF guard checked at connect time: a name that resolved to a public
address when the destination was checked and to an internal one when the SDK connects is refused, and a pinned
connection still sends the URL's host name (Host header, the Jira client's normal calls)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
import requests
from pydantic import SecretStr

from control.subscriptions.settings import OutboundSettings
from control.subscriptions.store import Subscription
from metalake.net.ssrf import AddressGuard, RefusedAddress
from ops.settings import Settings
from processors.outbound.destinations.jira.destination import JiraDestination
from processors.outbound.destinations.jira.pinned import GuardedAdapter, guard_session
from processors.outbound.runtime.destination import DestinationEnv, PermanentDelivery
from processors.outbound.runtime.ledger import LedgerScope
from tests._support.fake_http import FakeServer, Reply, Seen
from tests._support.jira_server import JiraServer
from tests._support.outbound_helpers import JIRA_EMAIL, JIRA_TOKEN, as_change, classification_event
from tests._support.scripted_dns import ScriptedResolver

PUBLIC, INTERNAL = "93.184.216.34", "10.0.0.7"


class _Echo(FakeServer):
    """Answers 200 to everything except ``/hop``, which redirects to ``http://inner.test:<port>/``."""

    def route(self, req: Seen) -> Reply:
        if req.path == "/hop":
            return Reply(302, None, {"Location": f"http://inner.test:{self.port}/"})
        return Reply(200, {"ok": True})


@pytest.fixture
def echo() -> Iterator[_Echo]:
    server = _Echo()
    server.start()
    yield server
    server.stop()


def _session(resolver: ScriptedResolver, allow: tuple[str, ...] = ("127.0.0.0/8",)) -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # no proxy from the environment in the way
    guard_session(session, AddressGuard.from_settings(list(allow), resolver=resolver))
    return session


def test_connections_go_to_the_checked_address_with_the_host_name_kept(echo: _Echo) -> None:
    resolver = ScriptedResolver(hooks_test=["127.0.0.1"])
    with _session(resolver) as session:
        assert session.get(f"http://hooks.test:{echo.port}/x", timeout=5).status_code == 200
        assert isinstance(session.get_adapter("https://anything.example/"), GuardedAdapter)
    assert resolver.lookups == ["hooks.test"]
    assert [(r.path, r.headers["Host"]) for r in echo.requests] == [("/x", f"hooks.test:{echo.port}")]


def test_an_internal_address_is_refused_before_connecting(echo: _Echo) -> None:
    resolver = ScriptedResolver(hooks_test=[INTERNAL])
    with _session(resolver, allow=()) as session, pytest.raises(RefusedAddress, match="private address"):
        session.get(f"http://hooks.test:{echo.port}/x", timeout=5)
    assert echo.requests == []


def test_a_redirect_to_an_internal_address_is_refused_at_its_connect(echo: _Echo) -> None:
    resolver = ScriptedResolver(outer_test=["127.0.0.1"], inner_test=[INTERNAL])
    with _session(resolver, allow=("127.0.0.1/32",)) as session, pytest.raises(RefusedAddress):
        session.get(f"http://outer.test:{echo.port}/hop", timeout=5)
    assert resolver.lookups == ["outer.test", "inner.test"]
    assert [r.path for r in echo.requests] == ["/hop"]


def _jira(resolver: ScriptedResolver, allow: list[str]) -> JiraDestination:
    settings = Settings().model_copy(update={"outbound": OutboundSettings(http_timeout_s=5, ssrf_allow=allow)})
    return JiraDestination(DestinationEnv(settings, AddressGuard.from_settings(allow, resolver=resolver)))


def _sub(server: str) -> Subscription:
    return Subscription(
        tenant="acme",
        name="jira",
        destination="jira",
        config={"server": server, "email": JIRA_EMAIL, "project": "GOV"},
        secrets={"api_token": SecretStr(JIRA_TOKEN)},
    )


class _UnusedLedger:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the ledger must not be reached ({name})")


def test_jira_rebinding_between_check_and_connect_is_refused() -> None:
    # Public when the destination checks the server, internal when the SDK's session connects: nothing listens
    # on jira.test, so only the guarded connect can tell these apart from a plain connection error (retryable).
    resolver = ScriptedResolver(jira_test=[PUBLIC, INTERNAL])
    jira = _jira(resolver, [])
    change = as_change(classification_event("acme", "urn:metalake:postgres:prod/s/public/t/c", "PII"))
    with pytest.raises(PermanentDelivery, match="jira server refused: destination resolves to a private address"):
        jira.deliver(change, _sub("https://jira.test"), cast(LedgerScope, _UnusedLedger()))
    assert resolver.lookups == ["jira.test", "jira.test"]


def test_jira_client_is_built_through_the_guarded_session() -> None:
    server = JiraServer(JIRA_EMAIL, JIRA_TOKEN)
    server.start()
    try:
        resolver = ScriptedResolver(jira_test=["127.0.0.1"])
        jira = _jira(resolver, ["127.0.0.0/8"])
        sub = _sub(f"http://jira.test:{server.port}")
        client = jira._client(jira.config(sub), sub)
        assert client.deploymentType == "Cloud" and client._version == (1001, 0, 0)
        found = client.enhanced_search_issues('labels = "x"', maxResults=1, json_result=True)
        assert cast(dict[str, Any], found)["issues"] == []
        hosts = {r.headers["Host"] for r in server.requests}
        assert hosts == {f"jira.test:{server.port}"}
        assert server.requests[0].path == "/rest/api/3/serverInfo"
        # The destination's check, then one lookup per new connection of the SDK's session (kept alive after).
        assert set(resolver.lookups) == {"jira.test"} and len(resolver.lookups) >= 2
    finally:
        server.stop()
