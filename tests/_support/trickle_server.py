"""A receiver that reads a request and then answers one byte at a time, ``interval`` seconds apart, never finishing:
every read of the client returns within its socket timeout, so only a wall-clock deadline ends the exchange. It is a
real TCP server on loopback. It gives up after ``give_up_s`` (a test without a deadline fails instead of hanging).
``closed_after`` records how long each connection lasted, ``closed_at`` when it ended (``time.time()``)."""

from __future__ import annotations

import socket
import threading
import time


class TrickleServer:
    def __init__(self, interval: float = 1.0, give_up_s: float = 8.0) -> None:
        self.interval, self.give_up_s = interval, give_up_s
        self.requests: list[bytes] = []
        self.closed_after: list[float] = []
        self.closed_at: list[float] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stopping = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> TrickleServer:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _read_request(self, conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        self.requests.append(head)

    def _serve(self, conn: socket.socket) -> None:
        started = time.monotonic()
        with conn:
            self._read_request(conn)
            answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 100_000
            try:
                for byte in answer:
                    if self._stopping.is_set() or time.monotonic() - started > self.give_up_s:
                        break
                    conn.sendall(bytes([byte]))
                    time.sleep(self.interval)
            except OSError:
                pass  # the client dropped the connection: what a deadline does
        self.closed_after.append(time.monotonic() - started)
        self.closed_at.append(time.time())
