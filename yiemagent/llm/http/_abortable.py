"""HTTP requests that another thread can end at once, even before the reply's headers arrive.

``requests`` offers no way to stop a request in flight: closing a session only closes idle
connections, and a response exists only once its headers are in. Here each connection reports
itself, as it connects and as it sends a request, to the ``RequestInterrupter`` active on its
thread; ``interrupt()`` then shuts its socket down, so the blocked connect, send or read returns
with an error at once. Use a session from ``interruptible_session()``::

    interrupter = RequestInterrupter()
    unregister = signal.on_abort(interrupter.interrupt)
    with interrupter.active():
        response = session.get(url, timeout=10)   # ends at once when signal fires

Only a plain TCP connect still in progress cannot be cut short; the connect timeout bounds it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import requests
import urllib3.connection
import urllib3.connectionpool
import urllib3.poolmanager
from requests.adapters import HTTPAdapter

__all__ = ["InterruptibleAdapter", "RequestInterrupter", "interruptible_session"]

_local = threading.local()  # .interrupter: the RequestInterrupter active on this thread


def _shutdown(sock: Any) -> None:
    """Shut ``sock`` down for both directions; best effort, never raises.

    ``socket.socket.shutdown`` is called directly: ``SSLSocket.shutdown`` would also drop its TLS
    state, under the feet of the thread still reading from it.
    """
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


class RequestInterrupter:
    """Ends, from any thread, the HTTP request a thread runs inside ``active()``.

    Works with sessions from ``interruptible_session()``. Once ``interrupt()`` was called, every
    later request made inside ``active()`` fails at once too; make a new interrupter per call.
    Never touches a connection that has since been taken by another request.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._interrupted = False
        self._connection: _TrackedConnection | None = None
        self._sock: Any = None

    @property
    def interrupted(self) -> bool:
        """Whether ``interrupt()`` was called."""
        return self._interrupted

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Make this the interrupter of the requests the current thread makes inside the block.

        On leaving, the connection is forgotten: an ``interrupt()`` that comes later leaves alone
        a connection that went back to the pool.
        """
        previous = getattr(_local, "interrupter", None)
        _local.interrupter = self
        try:
            yield
        finally:
            _local.interrupter = previous
            with self._lock:
                self._connection, self._sock = None, None

    def interrupt(self) -> None:
        """End the request in flight now (its thread gets a connection error) and any later one."""
        with self._lock:
            self._interrupted = True
            connection, sock = self._connection, self._sock
        if connection is not None and connection.interrupter is self:
            _shutdown(sock if sock is not None else connection.sock)

    def _bind(self, connection: _TrackedConnection) -> None:
        """Note the connection the active thread is using (and its socket, once connected)."""
        with self._lock:
            connection.interrupter = self
            self._connection = connection
            if connection.sock is not None:
                # Kept: http.client drops conn.sock once a reply that closes the connection
                # begins, while the reply is still read from this very socket.
                self._sock = connection.sock
            interrupted = self._interrupted
        if interrupted:
            _shutdown(connection.sock)


def _bind_to_active(connection: _TrackedConnection) -> None:
    interrupter = getattr(_local, "interrupter", None)
    if isinstance(interrupter, RequestInterrupter):
        interrupter._bind(connection)


class _TrackedConnection(urllib3.connection.HTTPConnection):
    """An HTTP connection that reports itself to its thread's active ``RequestInterrupter``."""

    interrupter: RequestInterrupter | None = None

    def connect(self) -> None:
        _bind_to_active(self)  # a TLS handshake on the new socket can already be cut short
        super().connect()
        _bind_to_active(self)  # records the socket, or shuts it at once if interrupted meanwhile

    def request(self, *args: Any, **kwargs: Any) -> None:
        _bind_to_active(self)  # also a pooled connection, which connect() never sees again
        super().request(*args, **kwargs)


class _TrackedHTTPSConnection(_TrackedConnection, urllib3.connection.HTTPSConnection):
    """The HTTPS flavour of ``_TrackedConnection``."""


class _TrackedHTTPPool(urllib3.connectionpool.HTTPConnectionPool):
    ConnectionCls = _TrackedConnection


class _TrackedHTTPSPool(urllib3.connectionpool.HTTPSConnectionPool):
    ConnectionCls = _TrackedHTTPSConnection


_TRACKED_POOLS = {"http": _TrackedHTTPPool, "https": _TrackedHTTPSPool}


def _track(manager: Any) -> Any:
    """Make ``manager`` open tracked connections, unless it uses pools of its own (SOCKS)."""
    if getattr(manager, "pool_classes_by_scheme", None) is urllib3.poolmanager.pool_classes_by_scheme:
        manager.pool_classes_by_scheme = _TRACKED_POOLS
    return manager


class InterruptibleAdapter(HTTPAdapter):
    """A ``requests`` adapter whose connections a ``RequestInterrupter`` can end."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        _track(self.poolmanager)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        return _track(super().proxy_manager_for(proxy, **proxy_kwargs))


def interruptible_session() -> requests.Session:
    """Return a ``requests.Session`` whose requests a ``RequestInterrupter`` can end."""
    session = requests.Session()
    session.mount("https://", InterruptibleAdapter())
    session.mount("http://", InterruptibleAdapter())
    return session
