"""A fault server for the Prometheus HTTP API: a real HTTP server on 127.0.0.1 that passes each
request on to a real backend (Prometheus or VictoriaMetrics) and answers what the backend
answered, except where a fault installed by the test changes the answer.

It produces what a real server cannot be made to produce on demand: a VictoriaMetrics cluster's
`"isPartial": true` with some series missing, `warnings` on metadata calls, a metric-name list
with names missing, a gzip bomb, an answer dripped one byte at a time (its status line and
headers too, if asked). Everything else comes from the real backend, through real HTTP.

    with PromFaultServer(prom_url) as srv:
        srv.faults.append(partial_answers())
        ... scan --prometheus-url srv.url ...

A fault is a callable `(call, upstream) -> Reply | None`: `call` is the request (method, path,
parameters, headers), `upstream()` gets the backend's answer; returning None leaves the request
to the next fault and finally to the backend. Every request is recorded in `calls`.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx


@dataclass
class Reply:
    """An answer to send."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    drip_s: float = 0.0
    """Seconds between two bytes of the body (0: all at once)."""
    drip_head: bool = False
    """Drip the status line and headers too."""

    def json(self) -> Any:
        return json.loads(self.body)

    def with_json(self, doc: Any) -> Reply:
        return Reply(self.status, json.dumps(doc).encode(), dict(self.headers))


@dataclass(frozen=True)
class Call:
    """One request the server saw."""

    method: str
    path: str
    params: dict[str, list[str]]
    """Query and form parameters together."""
    headers: dict[str, str]
    """Header names in lower case."""
    query: dict[str, list[str]]
    """The URL's query parameters alone."""


Fault = Callable[[Call, Callable[[], Reply]], "Reply | None"]


class PromFaultServer:
    """A threaded HTTP server in front of `upstream` (None: faults answer everything, anything
    else is 404)."""

    def __init__(self, upstream: str | None = None, faults: Iterable[Fault] = ()) -> None:
        self.upstream = upstream.rstrip("/") if upstream else None
        self.faults: list[Fault] = list(faults)
        self.calls: list[Call] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._client = httpx.Client(timeout=60)

    def start(self) -> PromFaultServer:
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self.stopping.set()
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.close_connections()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._client.close()

    def __enter__(self) -> PromFaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def paths(self) -> list[str]:
        with self._lock:
            return [c.path for c in self.calls]

    def _record(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)

    def forward(self, call: Call, body: bytes) -> Reply:
        """The backend's answer to `call`, uncompressed."""
        if self.upstream is None:
            return Reply(404, b'{"status":"error","errorType":"not_found","error":"no backend"}')
        headers = {"Accept-Encoding": "identity"}
        if "content-type" in call.headers:
            headers["Content-Type"] = call.headers["content-type"]
        resp = self._client.request(
            call.method,
            self.upstream + call.path,
            params=call.query,
            content=body,
            headers=headers,
        )
        return Reply(
            resp.status_code,
            resp.content,
            {"Content-Type": resp.headers.get("content-type", "application/json")},
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: PromFaultServer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open_sockets: set[socket.socket] = set()
        self.sockets_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self.sockets_lock:
            socks = list(self.open_sockets)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up mid-answer (a deadline) is what some tests want


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        owner = self.server.owner
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        query = parse_qs(parts.query, keep_blank_values=True)
        params = {k: list(v) for k, v in query.items()}
        if body and "form-urlencoded" in (self.headers.get("Content-Type") or ""):
            for k, v in parse_qs(body.decode(), keep_blank_values=True).items():
                params.setdefault(k, []).extend(v)
        headers = {k.lower(): v for k, v in self.headers.items()}
        call = Call(method, parts.path, params, headers, query)
        owner._record(call)
        cache: list[Reply] = []

        def upstream() -> Reply:
            if not cache:
                cache.append(owner.forward(call, body))
            return cache[0]

        reply: Reply | None = None
        for fault in owner.faults:
            reply = fault(call, upstream)
            if reply is not None:
                break
        self._send(reply or upstream(), owner.stopping)

    def _send(self, reply: Reply, stopping: threading.Event) -> None:
        head = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}\r\n"]
        headers = {**reply.headers, "Content-Length": str(len(reply.body))}
        head += [f"{k}: {v}\r\n" for k, v in headers.items()]
        head.append("\r\n")
        data = "".join(head).encode()
        try:
            if reply.drip_head:
                self._drip(data, reply.drip_s, stopping)
            else:
                self.wfile.write(data)
            if reply.drip_s > 0:
                self._drip(reply.body, reply.drip_s, stopping)
            else:
                self.wfile.write(reply.body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _drip(self, data: bytes, every_s: float, stopping: threading.Event) -> None:
        for i in range(len(data)):
            if stopping.wait(every_s):
                self.close_connection = True
                return
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 422: "?"}


# -- faults ------------------------------------------------------------------------------------

QUERY_PATHS = ("/api/v1/query", "/api/v1/query_range")


def partial_answers(paths: tuple[str, ...] = QUERY_PATHS) -> Fault:
    """Like a VictoriaMetrics cluster with a storage node down: each answer on `paths` loses
    every other series and says `"isPartial": true`."""

    def fault(call: Call, upstream: Callable[[], Reply]) -> Reply | None:
        if call.path not in paths:
            return None
        got = upstream()
        doc = got.json()
        if doc.get("status") != "success":
            return got
        doc["data"]["result"] = doc["data"]["result"][::2]
        doc["isPartial"] = True
        return got.with_json(doc)

    return fault


def metadata(path: str, rewrite: Callable[[dict[str, Any]], dict[str, Any]]) -> Fault:
    """The backend's answer on `path`, rewritten (warnings added, names dropped ...)."""

    def fault(call: Call, upstream: Callable[[], Reply]) -> Reply | None:
        if call.path != path:
            return None
        got = upstream()
        return got.with_json(rewrite(got.json()))

    return fault


def answer(paths: tuple[str, ...], reply: Reply) -> Fault:
    """Answer every request on `paths` with `reply`, the backend unasked."""

    def fault(call: Call, upstream: Callable[[], Reply]) -> Reply | None:
        return reply if call.path in paths else None

    return fault


def dripped(paths: tuple[str, ...], every_s: float, head: bool = False) -> Fault:
    """The backend's answer on `paths`, sent one byte every `every_s` seconds."""

    def fault(call: Call, upstream: Callable[[], Reply]) -> Reply | None:
        if call.path not in paths:
            return None
        got = upstream()
        return Reply(got.status, got.body, got.headers, drip_s=every_s, drip_head=head)

    return fault


def require_query_param(name: str, value: str) -> Fault:
    """401 for a request without `?name=value` in its URL (a token in the URL, as some
    gateways want it)."""

    def fault(call: Call, upstream: Callable[[], Reply]) -> Reply | None:
        if call.query.get(name) == [value]:
            return None
        return Reply(401, b'{"status":"error","errorType":"unauthorized","error":"no token"}')

    return fault


def gzip_bomb(inflated: int, head: bytes, tail: bytes, piece: int = 64 << 20) -> bytes:
    """A gzip member of `head`, then spaces, then `tail`, `inflated` bytes in all once
    decompressed, built without compressing them all: the compressed form of `piece` spaces is
    repeated (a full flush makes each repetition the same bytes). About a thousandth of
    `inflated` in size."""
    n = max(1, (inflated - len(head) - len(tail)) // piece)
    spaces = b" " * piece
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(spaces) + c.flush(zlib.Z_FULL_FLUSH)
    last = c.compress(tail) + c.flush()
    crc = zlib.crc32(head)
    for _ in range(n):
        crc = zlib.crc32(spaces, crc)
    crc = zlib.crc32(tail, crc)
    size = len(head) + n * piece + len(tail)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    return header + first + block * n + last + struct.pack("<II", crc, size & 0xFFFFFFFF)


def wait_for(predicate: Callable[[], bool], seconds: float = 10.0) -> bool:
    """Poll `predicate` until it holds or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()
