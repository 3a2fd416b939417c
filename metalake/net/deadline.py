"""A wall-clock deadline over the connections one thread opens to addresses the SSRF guard handed out.

A socket timeout bounds one read, not a response: a receiver that trickles a byte every few seconds never trips it
and holds the caller for as long as it likes. Within :func:`network_deadline`, every connection the thread opens to an
address :class:`metalake.net.ssrf.AddressGuard` resolved in that time (the guard calls :func:`note_peer`) is
remembered: its connect timeout is cut to what is left, and when the deadline passes a watchdog thread shuts it down
(``shutdown(SHUT_RDWR)`` on a duplicate of its descriptor, so TLS wrapping, which detaches the original socket
object, does not hide it). The blocked read then ends at once with an error, whatever library was reading (http.client,
urllib, urllib3); a connect attempted after the deadline is refused with :class:`DeadlineExceeded`.

Connections are found through the interpreter's ``socket.connect`` audit event, so SDKs that open their own sockets
(slack-sdk's urllib, jira's requests) are covered without hooks into them. Only addresses the guard handed out in the
deadline are tracked: the thread's MongoDB connections (the delivery ledger) are never cut. Not covered: a connection
made through an operator's proxy (``HTTPS_PROXY``; the proxy's address was not resolved by the guard), and a pooled
keep-alive connection opened before the deadline began (callers close their pools after each unit of work).
"""

from __future__ import annotations

import heapq
import ipaddress
import itertools
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class DeadlineExceeded(TimeoutError):
    """A connection was attempted after the thread's deadline passed."""


def _peer(host: str, port: int) -> tuple[str, int] | None:
    try:
        return str(ipaddress.ip_address(str(host).split("%", 1)[0].strip("[]"))), int(port)
    except ValueError:
        return None


class Deadline:
    """One thread's deadline: see the module docstring. Made by :func:`network_deadline`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.ends = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._peers: set[tuple[str, int]] = set()
        self._sockets: list[socket.socket] = []
        self._expired = False
        self._finished = False

    @property
    def expired(self) -> bool:
        return self._expired or self.remaining() <= 0

    def remaining(self) -> float:
        return self.ends - time.monotonic()

    def note_peer(self, address: str, port: int) -> None:
        peer = _peer(address, port)
        if peer is not None:
            with self._lock:
                self._peers.add(peer)

    def on_connect(self, sock: socket.socket, address: Any) -> None:  # noqa: ANN401
        if not isinstance(address, tuple) or len(address) < 2:
            return
        peer = _peer(address[0], address[1])
        with self._lock:
            if peer is None or peer not in self._peers:
                return
            left = self.remaining()
            if self._expired or left <= 0:
                raise DeadlineExceeded(f"deadline of {self.seconds:g} s passed")
            current = sock.gettimeout()
            sock.settimeout(left if current is None else min(current, left))
            self._sockets.append(sock.dup())

    def cut(self) -> None:
        """End every tracked connection now (the watchdog calls this when the deadline passes)."""
        with self._lock:
            if self._finished:
                return
            self._expired = True
            for sock in self._sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already closed by its owner, or never connected

    def finish(self) -> None:
        with self._lock:
            self._finished = True
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()


class Watchdog:
    """One thread that cuts deadlines when they pass (not one timer thread per deadline)."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, deadline: Deadline) -> None:
        with self._wake:
            heapq.heappush(self._due, (deadline.ends, next(self._order), deadline))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="network-deadline", daemon=True)
                self._thread.start()
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._wake.wait(self._due[0][0] - time.monotonic() if self._due else None)
                _, _, deadline = heapq.heappop(self._due)
            deadline.cut()


WATCHDOG = Watchdog()
_local = threading.local()
_hook_lock = threading.Lock()
_hooked = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect":
        current: Deadline | None = getattr(_local, "deadline", None)
        if current is not None:
            current.on_connect(args[0], args[1])


def _install() -> None:
    global _hooked
    with _hook_lock:
        if not _hooked:
            # Audit hooks cannot be removed; this one does nothing in a thread without a deadline.
            sys.addaudithook(_audit)
            _hooked = True


def current_deadline() -> Deadline | None:
    return getattr(_local, "deadline", None)


def note_peer(address: str, port: int) -> None:
    """The guard handed out ``address``: the thread's deadline (if any) covers connections to it."""
    current = current_deadline()
    if current is not None:
        current.note_peer(address, port)


@contextmanager
def network_deadline(seconds: float, watchdog: Watchdog = WATCHDOG) -> Iterator[Deadline]:
    """Bound the guarded connections this thread opens inside the block to ``seconds`` of wall-clock time."""
    _install()
    deadline, previous = Deadline(seconds), current_deadline()
    _local.deadline = deadline
    watchdog.watch(deadline)
    try:
        yield deadline
    finally:
        _local.deadline = previous
        deadline.finish()
