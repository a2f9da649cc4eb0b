"""A server that accepts connections and never answers: what a proxy or `kubectl port-forward`
whose backend is gone looks like from outside. No real server can be made to do this on demand.

It listens on a free port of 127.0.0.1 in a background thread, accepts every connection, reads
whatever is sent and never writes a byte; it closes the connections when the test is done:

    with SilentServer() as srv:
        ... scan --prometheus-url srv.url ...
    assert srv.accepted >= 1
"""

from __future__ import annotations

import contextlib
import socket
import threading


class SilentServer:
    """Accepts and reads, never answers."""

    def __init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name="silent-server", daemon=True)

    @property
    def accepted(self) -> int:
        """How many connections were accepted so far."""
        with self._lock:
            return len(self._conns)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            conn.settimeout(0.05)
            with self._lock:
                self._conns.append(conn)
        # Drain nothing, answer nothing: the connections stay open until `close`.

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.close()
        self._sock.close()
