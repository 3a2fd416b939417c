"""Slack's WebClient connects to the address the SSRF guard checked: a real ``chat_postMessage`` over HTTPS reaches a
local server for a made-up name (which no DNS resolves) with that name in Host, SNI and the certificate check; a
name that would rebind is never looked up again; redirects are refused before urllib could follow them."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
import ssl
import threading
import time
import urllib.error
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic import SecretStr

from control.subscriptions.settings import OutboundSettings
from control.subscriptions.store import Subscription
from metalake.net.ssrf import AddressGuard, RefusedAddress
from ops.settings import Settings
from processors.outbound.destinations.slack.destination import SlackDestination
from processors.outbound.destinations.slack.pinned import (
    PinnedTLSContext,
    RedirectRefused,
    _StatusWatch,
    pinned_tls_context,
    pinned_web_client,
)
from processors.outbound.destinations.slack.spec import SlackConfig
from processors.outbound.runtime.destination import DestinationEnv, PermanentDelivery
from processors.outbound.runtime.ledger import LedgerScope
from tests._support.fake_http import FakeServer, Reply, Seen
from tests._support.outbound_helpers import as_change, classification_event
from tests._support.scripted_dns import ScriptedResolver
from tests._support.selfsigned import self_signed
from tests._support.slack_server import SlackServer

TOKEN = "xoxb-pinned-test"
PUBLIC, INTERNAL = "93.184.216.34", "10.0.0.7"


def _certificate(tmp: Path) -> tuple[Path, Path]:
    return self_signed(tmp, "slack.test")


@dataclass
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class TLSSlack:
    """An HTTPS server answering chat.postMessage/conversations.history like Slack, recording requests and SNI.

    Under ``/hop/`` it answers a 302 to ``redirect_to``; under ``/continue/`` a ``100 Continue`` and then the same
    302, written in small pieces (TLS records) so the client reads the status lines piecemeal."""

    port: int
    cafile: str
    redirect_to: str = ""
    requests: list[_Request] = field(default_factory=list)
    server_names: list[str | None] = field(default_factory=list)


def _serve_tls(tmp: Path, family: socket.AddressFamily, host: str) -> Iterator[TLSSlack]:
    cert, key = _certificate(tmp)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    state = TLSSlack(port=0, cafile=str(cert))

    def remember_sni(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        state.server_names.append(name)

    context.sni_callback = remember_sni

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state.requests.append(_Request("POST", self.path, dict(self.headers.items()), body))
            if self.path.startswith("/hop/"):
                self.send_response(302)
                self.send_header("Location", state.redirect_to)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.path.startswith("/continue/"):
                raw = "HTTP/1.1 100 Continue\r\nX-A: b\r\n\r\n"
                raw += f"HTTP/1.1 302 Found\r\nLocation: {state.redirect_to}\r\nContent-Length: 0\r\n\r\n"
                with contextlib.suppress(OSError):  # the client hangs up once it has read the 302
                    for i in range(0, len(raw), 5):
                        self.wfile.write(raw[i : i + 5].encode())
                        self.wfile.flush()
                        time.sleep(0.002)
                return
            sent = json.loads(body) if self.headers.get("Content-Type", "").startswith("application/json") else {}
            answer = {"ok": True, "channel": sent.get("channel", "C1"), "ts": "1700000000.000100", "messages": []}
            payload = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        address_family = family
        daemon_threads = True

    server = Server((host, 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def tls_slack(tmp_path: Path) -> Iterator[TLSSlack]:
    yield from _serve_tls(tmp_path, socket.AF_INET, "127.0.0.1")


@pytest.fixture
def inner() -> Iterator[FakeServer]:
    """Where a redirect points: records whatever reaches it (nothing must)."""

    class Inner(FakeServer):
        def route(self, req: Seen) -> Reply:
            return Reply(200, {"ok": True, "channel": "C1", "ts": "1.0"})

    server = Inner()
    server.start()
    yield server
    server.stop()


def _guard(resolver: ScriptedResolver, allow: tuple[str, ...] = ("127.0.0.0/8",)) -> AddressGuard:
    return AddressGuard.from_settings(list(allow), resolver=resolver)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


# -- the pinned client over HTTPS -------------------------------------------------------------------------------------


def test_post_message_reaches_the_checked_address_with_host_sni_and_certificate_of_the_name(
    tls_slack: TLSSlack,
) -> None:
    # Rebinding: the name is allowed (loopback, allowlisted) at the check and internal for any later lookup. No
    # DNS knows slack.test, so a lookup by urllib itself would fail the call: the request arriving proves none.
    resolver = ScriptedResolver(slack_test=["127.0.0.1", INTERNAL])
    client = pinned_web_client(
        f"https://slack.test:{tls_slack.port}/api/",
        guard=_guard(resolver),
        token=TOKEN,
        timeout=5,
        cafile=tls_slack.cafile,
    )
    assert client.base_url == f"https://127.0.0.1:{tls_slack.port}/api/"
    response = client.chat_postMessage(channel="C1", text="PII on orders.email")
    history = client.conversations_history(channel="C1", limit=1)
    assert response["ts"] == "1700000000.000100" and history["ok"] is True
    assert resolver.lookups == ["slack.test"]  # the guard's one lookup; the INTERNAL answer was never asked for
    assert [(r.path, r.headers["Host"], r.headers["Authorization"]) for r in tls_slack.requests] == [
        ("/api/chat.postMessage", f"slack.test:{tls_slack.port}", f"Bearer {TOKEN}"),
        ("/api/conversations.history", f"slack.test:{tls_slack.port}", f"Bearer {TOKEN}"),
    ]
    assert json.loads(tls_slack.requests[0].body) == {"channel": "C1", "text": "PII on orders.email"}
    assert tls_slack.server_names == ["slack.test", "slack.test"]  # SNI: the name, not the address


def test_the_certificate_is_checked_against_the_configured_name(tls_slack: TLSSlack) -> None:
    # The same server under a name its certificate does not carry: the TLS check fails before any request.
    resolver = ScriptedResolver(other_test=["127.0.0.1"])
    client = pinned_web_client(
        f"https://other.test:{tls_slack.port}/api/",
        guard=_guard(resolver),
        token=TOKEN,
        timeout=5,
        cafile=tls_slack.cafile,
    )
    with pytest.raises(urllib.error.URLError) as caught:
        client.chat_postMessage(channel="C1", text="x")
    assert isinstance(caught.value.reason, ssl.SSLCertVerificationError)
    assert tls_slack.requests == [] and tls_slack.server_names == ["other.test"]


def test_certificates_are_verified_against_the_system_store_by_default(tls_slack: TLSSlack) -> None:
    client = pinned_web_client(
        f"https://slack.test:{tls_slack.port}/api/",
        guard=_guard(ScriptedResolver(slack_test=["127.0.0.1"])),
        token=TOKEN,
        timeout=5,
    )
    with pytest.raises(urllib.error.URLError) as caught:
        client.chat_postMessage(channel="C1", text="x")
    assert isinstance(caught.value.reason, ssl.SSLCertVerificationError)  # self-signed: not trusted by default
    assert tls_slack.requests == []


def test_an_internal_address_is_refused_before_any_connection(tls_slack: TLSSlack) -> None:
    resolver = ScriptedResolver(slack_test=[INTERNAL])
    with pytest.raises(RefusedAddress, match="private address"):
        pinned_web_client(
            f"https://slack.test:{tls_slack.port}/api/", guard=_guard(resolver, ()), token=TOKEN, timeout=5
        )
    assert tls_slack.requests == [] and tls_slack.server_names == []


@pytest.mark.parametrize("prefix", ["hop", "continue"])
def test_a_redirect_is_refused_and_never_followed(tls_slack: TLSSlack, inner: FakeServer, prefix: str) -> None:
    # urllib would follow a 302 to a POST as a GET carrying the token, here to plain http on another address.
    tls_slack.redirect_to = f"http://127.0.0.1:{inner.port}/latest/meta-data/"
    client = pinned_web_client(
        f"https://slack.test:{tls_slack.port}/{prefix}/api/",
        guard=_guard(ScriptedResolver(slack_test=["127.0.0.1"])),
        token=TOKEN,
        timeout=5,
        cafile=tls_slack.cafile,
    )
    with pytest.raises(RedirectRefused, match=r"redirect \(302\)"):
        client.chat_postMessage(channel="C1", text="x")
    assert [r.path for r in tls_slack.requests] == [f"/{prefix}/api/chat.postMessage"]
    assert inner.requests == []


def test_a_connection_to_another_address_is_refused_before_the_handshake(tls_slack: TLSSlack) -> None:
    context = pinned_tls_context("slack.test", (ipaddress.ip_address("127.0.0.1"), tls_slack.port + 1))
    with socket.create_connection(("127.0.0.1", tls_slack.port), timeout=5) as raw:
        with pytest.raises(RefusedAddress, match="not to the address the guard checked"):
            context.wrap_socket(raw, server_hostname="127.0.0.1")
    assert tls_slack.server_names == []  # no ClientHello reached the server


def test_ipv6_addresses_are_bracketed_and_reached(tmp_path: Path) -> None:
    server = _serve_tls(tmp_path, socket.AF_INET6, "::1")
    state = next(server)
    try:
        client = pinned_web_client(
            f"https://slack.test:{state.port}/api/",
            guard=_guard(ScriptedResolver(slack_test=["::1"]), ("::1/128",)),
            token=TOKEN,
            timeout=5,
            cafile=state.cafile,
        )
        assert client.base_url == f"https://[::1]:{state.port}/api/"
        assert client.chat_postMessage(channel="C1", text="x")["ok"] is True
        assert [r.headers["Host"] for r in state.requests] == [f"slack.test:{state.port}"]
        assert state.server_names == ["slack.test"]
    finally:
        next(server, None)


def test_the_default_port_and_host_header() -> None:
    client = pinned_web_client(
        "https://slack.test/api/", guard=_guard(ScriptedResolver(slack_test=[PUBLIC]), ()), token=TOKEN, timeout=5
    )
    assert client.base_url == f"https://{PUBLIC}:443/api/" and client.headers["Host"] == "slack.test"
    assert isinstance(client.ssl, PinnedTLSContext)
    assert client.ssl.pinned_host == "slack.test" and str(client.ssl.pinned_peer) == f"(IPv4Address('{PUBLIC}'), 443)"
    assert client.ssl.verify_mode == ssl.CERT_REQUIRED and client.ssl.check_hostname


@pytest.fixture
def connect_proxy() -> Iterator[tuple[int, list[str]]]:
    """A minimal HTTP CONNECT proxy: records each CONNECT line, connects to its target and relays bytes."""
    listener = socket.create_server(("127.0.0.1", 0))
    lines: list[str] = []

    def relay(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = listener.accept()
                head = b""
                while b"\r\n\r\n" not in head:
                    head += client.recv(4096)
                line = head.split(b"\r\n", 1)[0].decode()
                lines.append(line)
                host, port = line.split()[1].rsplit(":", 1)
                upstream = socket.create_connection((host, int(port)), timeout=5)
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                threading.Thread(target=relay, args=(client, upstream), daemon=True).start()
                threading.Thread(target=relay, args=(upstream, client), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1], lines
    listener.close()


def test_through_a_proxy_the_tunnel_goes_to_the_checked_address(
    tls_slack: TLSSlack, connect_proxy: tuple[int, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy_port, connects = connect_proxy
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy_port}")
    resolver = ScriptedResolver(slack_test=["127.0.0.1", INTERNAL])
    client = pinned_web_client(
        f"https://slack.test:{tls_slack.port}/api/",
        guard=_guard(resolver),
        token=TOKEN,
        timeout=5,
        cafile=tls_slack.cafile,
    )
    assert isinstance(client.ssl, PinnedTLSContext) and client.ssl.pinned_peer is None  # the peer is the proxy
    assert client.chat_postMessage(channel="C1", text="x")["ok"] is True
    # The proxy is asked for the checked address, not the name (it does not resolve it either).
    # http.client tunnels with HTTP/1.0 before Python 3.12 and with HTTP/1.1 from 3.12 on.
    assert connects in ([f"CONNECT 127.0.0.1:{tls_slack.port} HTTP/1.{minor}"] for minor in (0, 1))
    assert [r.headers["Host"] for r in tls_slack.requests] == [f"slack.test:{tls_slack.port}"]
    assert tls_slack.server_names == ["slack.test"] and resolver.lookups == ["slack.test"]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://slack.test/api/", "must be http"),
        ("https:///api/", "must be http"),
        ("https://user:pw@slack.test/api/", "credentials"),
        ("https://slack.test:99999/api/", "invalid port"),
        ("http://slack.test/api/", "must be https"),  # a public address over plain http: redirects unstoppable
    ],
)
def test_unusable_base_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(RefusedAddress, match=message):
        pinned_web_client(url, guard=_guard(ScriptedResolver(slack_test=[PUBLIC]), ()), token=TOKEN, timeout=5)


# -- the status check, byte by byte ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "refused"),
    [
        (b"HTTP/1.1 200 OK\r\nLocation: http://x/\r\n\r\n", False),
        (b"HTTP/1.1 302 Found\r\n", True),
        (b"HTTP/1.0 308 Permanent Redirect\n", True),
        (b"HTTP/1.1 0302 Found\r\n", True),  # http.client reads int("0302") == 302
        (b"HTTP/1.1  301\r\n", True),
        (b"HTTP/1.1 100 Continue\r\nX: 1\r\n\r\nHTTP/1.1 303 See Other\r\n", True),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\n\nHTTP/1.1 301 Moved\r\n", True),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many Requests\r\n", False),
        (b"HTTP/1.1 503 x\r\n\r\nHTTP/1.1 302 after the answer is body\r\n", False),
        (b"HTTP/1.1 304 Not Modified\r\n", True),
        (b"HTTP/1.1 3xx\r\n", False),  # http.client refuses this status line itself
    ],
)
def test_the_status_check_reads_status_lines_like_http_client(head: bytes, refused: bool) -> None:
    for size in (1, 7, len(head)):
        watch = _StatusWatch()
        chunks = [head[i : i + size] for i in range(0, len(head), size)]
        if refused:
            with pytest.raises(RedirectRefused):
                for chunk in chunks:
                    watch.feed(chunk)
        else:
            for chunk in chunks:
                watch.feed(chunk)
            assert watch.done


# -- the destination ---------------------------------------------------------------------------------------------------


def _slack(resolver: ScriptedResolver, allow: list[str]) -> SlackDestination:
    outbound = OutboundSettings(http_timeout_s=5, ssrf_allow=allow, allow_base_url_override=True)
    settings = Settings().model_copy(update={"outbound": outbound})
    return SlackDestination(DestinationEnv(settings, AddressGuard.from_settings(allow, resolver=resolver)))


def _sub(base_url: str) -> Subscription:
    return Subscription(
        tenant="acme",
        name="slack",
        destination="slack",
        config={"channel": "C0123", "base_url": base_url},
        secrets={"token": SecretStr(TOKEN)},
    )


class _UnusedLedger:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the ledger must not be reached ({name})")


def test_the_destination_client_is_pinned_and_keeps_the_host_name() -> None:
    server = SlackServer(TOKEN)
    server.start()
    try:
        resolver = ScriptedResolver(slack_test=["127.0.0.1", INTERNAL])
        slack = _slack(resolver, ["127.0.0.0/8"])
        sub = _sub(f"http://slack.test:{server.port}/api/")
        client = slack._client(cast(SlackConfig, slack.config(sub)), sub)
        assert client.chat_postMessage(channel="C0123", text="x")["ok"] is True
        assert client.conversations_history(channel="C0123")["ok"] is True
        assert resolver.lookups == ["slack.test"]
        assert [r.headers["Host"] for r in server.requests] == [f"slack.test:{server.port}"] * 2
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("answers", "allow", "message"),
    [
        ([INTERNAL], [], "private address"),
        ([PUBLIC], [], "must be https"),
    ],
)
def test_the_destination_refuses_before_the_ledger(answers: list[str], allow: list[str], message: str) -> None:
    slack = _slack(ScriptedResolver(slack_test=answers), allow)
    change = as_change(classification_event("acme", "urn:metalake:postgres:prod/s/public/t/c", "PII"))
    with pytest.raises(PermanentDelivery, match=f"slack base_url refused: .*{message}"):
        slack.deliver(change, _sub("http://slack.test/api/"), cast(LedgerScope, _UnusedLedger()))


def test_a_redirect_is_a_permanent_failure_of_the_delivery(tls_slack: TLSSlack, inner: FakeServer) -> None:
    tls_slack.redirect_to = f"http://127.0.0.1:{inner.port}/"
    slack = _slack(ScriptedResolver(slack_test=["127.0.0.1"]), ["127.0.0.0/8"])
    client = pinned_web_client(
        f"https://slack.test:{tls_slack.port}/hop/api/",
        guard=slack.env.guard,
        token=TOKEN,
        timeout=5,
        cafile=tls_slack.cafile,
    )
    args = {"text": "x", "blocks": [], "metadata": {"event_type": "metalake_test", "event_payload": {}}}
    with pytest.raises(PermanentDelivery, match=r"slack refused: slack answered a redirect \(302\)"):
        slack._post(client, "C0123", None, args, "mld_x", None)
    assert inner.requests == []
