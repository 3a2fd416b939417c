"""A ``requests`` transport adapter whose connections go to addresses the SSRF guard checked (the Jira client's).

Mounted on a session for ``http://`` and ``https://``, every connection it opens (redirect targets included) is
resolved once through :class:`~metalake.net.ssrf.AddressGuard` and connected to the address that was
checked (:func:`metalake.net.pinned.connect_checked`, the webhooks' connect). Only the TCP connect
changes: urllib3 still sends the URL's host in ``Host``, and for TLS uses it for SNI and the certificate's hostname
check. A refused address raises :class:`~metalake.net.ssrf.RefusedAddress` out of the request, before
any byte is sent. Proxies from the environment (``HTTPS_PROXY``) are not pinned: the operator's proxy then makes the
connection.
"""

from __future__ import annotations

import socket
from typing import Any

from requests import Session
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.poolmanager import PoolManager

from metalake.net.pinned import connect_checked
from metalake.net.ssrf import AddressGuard


def _open(conn: HTTPConnection, guard: AddressGuard, *, require_tls: bool = False) -> socket.socket:
    # urllib3's own _new_conn with the lookup replaced, and its errors kept (requests maps them to ConnectionError).
    timeout = conn.timeout if conn.timeout is None or isinstance(conn.timeout, int | float) else None
    try:
        sock = connect_checked(guard, conn.host, conn.port, timeout, require_tls=require_tls)
    except socket.gaierror as exc:
        raise NameResolutionError(conn.host, conn, exc) from exc
    except TimeoutError as exc:
        raise ConnectTimeoutError(conn, f"Connection to {conn.host} timed out (connect timeout={timeout})") from exc
    except OSError as exc:
        raise NewConnectionError(conn, f"Failed to establish a new connection: {exc}") from exc
    for option in conn.socket_options or ():
        sock.setsockopt(*option)
    return sock


class _GuardedHTTPConnection(HTTPConnection):
    def __init__(self, *args: Any, guard: AddressGuard, **kwargs: Any) -> None:  # noqa: ANN401
        super().__init__(*args, **kwargs)
        self._guard = guard

    def _new_conn(self) -> socket.socket:
        # Plain http would carry the API token's basic auth in clear: only to an allowlisted test receiver.
        return _open(self, self._guard, require_tls=True)


class _GuardedHTTPSConnection(HTTPSConnection):
    def __init__(self, *args: Any, guard: AddressGuard, **kwargs: Any) -> None:  # noqa: ANN401
        super().__init__(*args, **kwargs)
        self._guard = guard

    def _new_conn(self) -> socket.socket:
        return _open(self, self._guard)


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


class _GuardedPoolManager(PoolManager):
    def __init__(self, guard: AddressGuard, **kwargs: Any) -> None:  # noqa: ANN401
        super().__init__(**kwargs)
        self._guard = guard
        self.pool_classes_by_scheme = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}

    def _new_pool(
        self, scheme: str, host: str, port: int, request_context: dict[str, Any] | None = None
    ) -> HTTPConnectionPool:
        # The pool hands its extra keywords to every connection it makes: that is how the guard gets there
        # (not through connection_pool_kw, which urllib3 turns into the pool's cache key).
        context = dict(self.connection_pool_kw if request_context is None else request_context)
        context["guard"] = self._guard
        return super()._new_pool(scheme, host, port, context)


class GuardedAdapter(HTTPAdapter):
    def __init__(self, guard: AddressGuard, **kwargs: Any) -> None:  # noqa: ANN401
        self._guard = guard  # before super().__init__, which builds the pool manager
        super().__init__(**kwargs)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any) -> None:  # noqa: ANN401
        self._pool_connections, self._pool_maxsize, self._pool_block = connections, maxsize, block
        self.poolmanager = _GuardedPoolManager(
            self._guard, num_pools=connections, maxsize=maxsize, block=block, **pool_kwargs
        )


def guard_session(session: Session, guard: AddressGuard) -> GuardedAdapter:
    """Route every http(s) connection of ``session`` through ``guard``; returns the mounted adapter."""
    adapter = GuardedAdapter(guard)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return adapter
