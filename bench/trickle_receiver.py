"""A webhook receiver that never finishes answering: it reads the request, then trickles its answer one byte every
``interval_s`` seconds (a status line, then a header that pads the answer out), so a client whose timeout counts per
read waits for ever while one with an overall deadline hangs up. On 127.0.0.1 only; a few hundred connections at
most; every connection ends when the client hangs up, the answer is sent, or ``stop`` is called.
Used by ``bench/tenant_isolation.py`` as the noisy tenant's webhook destination."""

from __future__ import annotations

import select
import socket
import threading
import time
from dataclasses import dataclass, field

MAX_REQUEST_BYTES = 1024 * 1024


@dataclass
class Held:
    """One connection: when it was accepted, how many answer bytes it got, how long the client held it."""

    accepted_at: float
    sent: int = 0
    held_s: float | None = None  # None while it is still open
    how: str = "open"  # "client closed", "answer sent", "stopped", "request unreadable"


@dataclass
class TrickleStats:
    connections: int
    refused: int
    open: int
    longest_held_s: float
    bytes_sent: int
    ended: dict[str, int] = field(default_factory=dict)


def trickle_answer(pad_bytes: int) -> bytes:
    """The whole answer the receiver would send if nobody hung up: a 200 with a header of ``pad_bytes`` letters."""
    return b"HTTP/1.1 200 OK\r\nX-Trickle: " + b"a" * pad_bytes + b"\r\nContent-Length: 0\r\n\r\n"


def read_request(conn: socket.socket, timeout_s: float) -> bool:
    """Read one request (head and a Content-Length body, bounded); False if it does not come whole in time."""
    conn.settimeout(timeout_s)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk or len(data) > MAX_REQUEST_BYTES:
                return False
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        while len(body) < min(length, MAX_REQUEST_BYTES):
            chunk = conn.recv(65536)
            if not chunk:
                return False
            body += chunk
    except (OSError, ValueError):
        return False
    return True


class TrickleReceiver:
    def __init__(self, interval_s: float = 3.0, pad_bytes: int = 100_000, max_connections: int = 256) -> None:
        self.interval_s = interval_s
        self.answer = trickle_answer(pad_bytes)
        self.max_connections = max_connections
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._held: list[Held] = []
        self._refused = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.25)
        self._threads: list[threading.Thread] = []

    @property
    def port(self) -> int:
        port: int = self._sock.getsockname()[1]
        return port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def __enter__(self) -> TrickleReceiver:
        accept = threading.Thread(target=self._accept_loop, name="trickle-accept", daemon=True)
        accept.start()
        self._threads.append(accept)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """End every connection and the server; the accept loop first, so no connection starts after."""
        self._stop.set()
        for thread in self._threads:  # the accept loop's thread first, then the connections' (no more are added)
            thread.join(timeout=5)
        self._sock.close()

    def stats(self) -> TrickleStats:
        now = time.monotonic()
        with self._lock:
            held = list(self._held)
            refused = self._refused
        ended: dict[str, int] = {}
        for h in held:
            ended[h.how] = ended.get(h.how, 0) + 1
        durations = [h.held_s if h.held_s is not None else now - h.accepted_at for h in held]
        return TrickleStats(
            connections=len(held),
            refused=refused,
            open=sum(1 for h in held if h.held_s is None),
            longest_held_s=max(durations, default=0.0),
            bytes_sent=sum(h.sent for h in held),
            ended=ended,
        )

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held = self._admit()
            if held is None:
                conn.close()
                continue
            thread = threading.Thread(target=self._serve, args=(conn, held), name="trickle-conn", daemon=True)
            self._threads.append(thread)  # before it starts: stop() joins every thread it finds here
            thread.start()

    def _admit(self) -> Held | None:
        with self._lock:
            if sum(1 for h in self._held if h.held_s is None) >= self.max_connections:
                self._refused += 1
                return None
            held = Held(time.monotonic())
            self._held.append(held)
            return held

    def _serve(self, conn: socket.socket, held: Held) -> None:
        with conn:
            how = self._trickle(conn, held) if read_request(conn, 10.0) else "request unreadable"
        with self._lock:
            held.how = how
            held.held_s = time.monotonic() - held.accepted_at

    def _trickle(self, conn: socket.socket, held: Held) -> str:
        for i in range(len(self.answer)):
            try:
                conn.sendall(self.answer[i : i + 1])
            except OSError:
                return "client closed"
            with self._lock:
                held.sent += 1
            if i + 1 == len(self.answer):
                return "answer sent"
            ended = self._wait(conn)
            if ended:
                return ended
        return "answer sent"

    def _wait(self, conn: socket.socket) -> str | None:
        """Sleep ``interval_s``, watching for the client's hang-up and for ``stop``."""
        deadline = time.monotonic() + self.interval_s
        while (left := deadline - time.monotonic()) > 0:
            if self._stop.is_set():
                return "stopped"
            readable, _, _ = select.select([conn], [], [], min(left, 0.25))
            if readable:
                try:
                    if not conn.recv(4096):
                        return "client closed"
                except OSError:
                    return "client closed"
        return None
