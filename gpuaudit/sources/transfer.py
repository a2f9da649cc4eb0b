"""Reading one HTTP answer within the limits (`limits.Limits`), for both sources: a deadline
on the whole request, and a cap on the body's size after decompression.

A socket timeout bounds each read, not the answer: a server that sends one byte a second never
trips it. `within` runs a request on a thread of its own and stops waiting when its deadline
passes; the request itself checks the same deadline between reads (`Deadline.check`) and gives
up at the next byte, so nothing keeps reading after the caller has moved on.

`read_body` decompresses gzip and deflate itself, a bounded piece at a time, so that a small
answer that inflates to gigabytes (a "gzip bomb") stops at the cap with at most the cap in
memory.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")

_WAIT_SLICE_S = 0.25
"""How often the waiting thread wakes up (a Ctrl-C is seen at least this often)."""


class DeadlineExceeded(Exception):
    """A request went on past its deadline."""


class AnswerTooLarge(Exception):
    """An answer was larger than the cap."""

    def __init__(self, limit: int) -> None:
        mib = limit / (1024 * 1024)
        super().__init__(f"larger than {mib:g} MiB" if mib >= 1 else f"larger than {limit} bytes")
        self.limit = limit


class BadEncoding(Exception):
    """An answer came in a content encoding gpuaudit did not ask for, or corrupt."""


class Deadline:
    """When one request must be done by (`time.monotonic` seconds)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self.abandoned = threading.Event()
        """Set when the caller stopped waiting: the request should stop at once."""

    def left(self) -> float:
        return self.at - time.monotonic()

    def check(self) -> None:
        """Raise `DeadlineExceeded` when the deadline has passed or the caller gave up."""
        if self.abandoned.is_set() or self.left() <= 0:
            raise DeadlineExceeded(f"no complete answer within {self.seconds:g} s")


class Allowance:
    """The time a whole collection may take: `per_request_s` (`--timeout`) for each request it
    needs, counted from when the allowance was made. The requests it needs are granted as they
    become known: those planned at the start, and those an answer asks for (`grant`). Retries,
    the waits between them and requests sent again after no answer take their time out of it,
    so that they can never multiply `--timeout` past it. Safe to use from several threads."""

    def __init__(self, per_request_s: float, requests: int = 0) -> None:
        self.per_request_s = per_request_s
        self.requests = requests
        """The requests granted so far."""
        self.granting = False
        """Whether each request grants itself (`grant` before it is sent): a stage whose
        requests are each needed once, such as discovery."""
        self._started = time.monotonic()
        self._lock = threading.Lock()

    def grant(self, requests: int = 1) -> None:
        """Allow `per_request_s` more for each of `requests` more requests."""
        with self._lock:
            self.requests += max(0, requests)

    @property
    def seconds(self) -> float:
        """The whole allowance so far, in seconds."""
        return self.requests * self.per_request_s

    def left(self) -> float:
        """Seconds left of the allowance (0 or less: spent)."""
        return self._started + self.seconds - time.monotonic()


_local = threading.local()


def current() -> Deadline | None:
    """The deadline of the request running on this thread (None outside `within`)."""
    found: Deadline | None = getattr(_local, "deadline", None)
    return found


def within(seconds: float, request: Callable[[Deadline], T]) -> T:
    """`request(deadline)`, run on a thread of its own; its result, or what it raised. Raises
    `DeadlineExceeded` when it is not done within `seconds` (the thread is then told to stop,
    and is left to do so at its next read)."""
    deadline = Deadline(seconds)
    done = threading.Event()
    box: dict[str, object] = {}

    def run() -> None:
        _local.deadline = deadline
        try:
            box["value"] = request(deadline)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = exc
        finally:
            _local.deadline = None
            done.set()

    worker = threading.Thread(target=run, name="gpuaudit-request", daemon=True)
    worker.start()
    while not done.wait(min(_WAIT_SLICE_S, max(0.0, deadline.left()))):
        if deadline.left() <= 0:
            deadline.abandoned.set()
            raise DeadlineExceeded(f"no complete answer within {seconds:g} s")
    if "error" in box:
        err = box["error"]
        assert isinstance(err, BaseException)
        raise err
    return box["value"]  # type: ignore[return-value]


def read_body(
    chunks: Iterable[bytes],
    encoding: str,
    limit: int,
    deadline: Deadline | None = None,
) -> bytes:
    """The body whose bytes on the wire are `chunks`, decoded from `encoding` (the
    Content-Encoding: empty or `identity`, `gzip`, `x-gzip` or `deflate`). Raises
    `AnswerTooLarge` past `limit` bytes after decoding, `DeadlineExceeded` when `deadline`
    passes between two chunks, `BadEncoding` for another encoding or a corrupt stream."""
    enc = encoding.strip().lower()
    decoder = _decoder(enc)
    out = bytearray()
    for chunk in chunks:
        if deadline is not None:
            deadline.check()
        if decoder is None:
            out += chunk
        else:
            _inflate(decoder, chunk, out, limit)
        if len(out) > limit:
            raise AnswerTooLarge(limit)
    if deadline is not None:
        deadline.check()
    if decoder is not None:
        _finish(decoder, out, limit)
    return bytes(out)


class _Inflater:
    """A zlib stream decoder that also reads gzip members one after another."""

    def __init__(self, wbits: int) -> None:
        self.wbits = wbits
        self.obj = zlib.decompressobj(wbits)
        self.fed = False


def _decoder(enc: str) -> _Inflater | None:
    if enc in ("", "identity"):
        return None
    if enc in ("gzip", "x-gzip"):
        return _Inflater(zlib.MAX_WBITS | 16)
    if enc == "deflate":
        return _Inflater(zlib.MAX_WBITS | 32)  # zlib-wrapped (RFC 9110), or gzip
    raise BadEncoding(f"it came in the content encoding {enc[:40]!r}, which was not asked for")


def _inflate(dec: _Inflater, data: bytes, out: bytearray, limit: int) -> None:
    """Decode `data` into `out`, never more than the room left under `limit` (plus one byte,
    to tell that it is over) at a time."""
    try:
        while data:
            dec.fed = True
            out += dec.obj.decompress(data, limit - len(out) + 1)
            if len(out) > limit:
                raise AnswerTooLarge(limit)
            if not dec.obj.eof:
                data = dec.obj.unconsumed_tail
                continue
            data = dec.obj.unused_data
            if not data.strip(b"\x00"):
                return  # the end, perhaps with padding
            dec.obj = zlib.decompressobj(dec.wbits)  # gzip allows members one after another
    except zlib.error as exc:
        raise BadEncoding(f"the compressed answer is corrupt ({exc})") from None


def _finish(dec: _Inflater, out: bytearray, limit: int) -> None:
    try:
        out += dec.obj.flush(limit - len(out) + 1)
    except zlib.error as exc:
        raise BadEncoding(f"the compressed answer is corrupt ({exc})") from None
    if len(out) > limit:
        raise AnswerTooLarge(limit)
    if dec.fed and not dec.obj.eof:
        raise BadEncoding("the compressed answer stops before its end (truncated)")
