"""Post a message to a Slack-compatible incoming webhook (Slack, Mattermost, Rocket.Chat and
others that accept `{"text": ...}`).

Webhook URLs carry their secret in the path or query, so nothing this module says (errors
included) shows more of the URL than `scheme://host[:port]`, and what the server answers is
shown only with every part of the URL's path, query and user info blanked out (servers echo
the URL, or a segment of it, back).

The server is not trusted either: the whole exchange, from connecting to the last byte read,
has one deadline (`gpuaudit.sources.transfer.within`: a server that dribbles its answer a byte
at a time cannot keep gpuaudit waiting), and of an answer that is not a success at most
`ANSWER_BYTES` are read, decompressed a bounded piece at a time (a gzip bomb stays small). A
success's body is never read.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

from gpuaudit.core import redact
from gpuaudit.core.errors import ConfigError, GpuauditError
from gpuaudit.report.text import terminal
from gpuaudit.sources import transfer

ANSWER_BYTES = 4096
"""The most bytes of an answer that is not a success read (after decompression) to say what
the server said."""

_SHOWN = 200
"""Characters of the server's answer shown in an error."""


class Transient(GpuauditError):
    """A post that may succeed if tried again: no answer in time, no connection, or HTTP 429
    or 5xx."""


def display_url(url: str) -> str:
    """`scheme://host[:port]` of a URL: no user, path, query or fragment."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(unparsable URL)"
    if ":" in host:
        host = f"[{host}]"
    return terminal(f"{parts.scheme or '?'}://{host}{port}", 200)


def check_url(url: str) -> None:
    """`--webhook` checked before anything runs: an http or https URL with a host
    (`ConfigError` otherwise, showing no more of it than `display_url`)."""
    try:
        parts = urlsplit(url.strip())
        _ = parts.port  # raises for a port that is not a number
        ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(
            f"--webhook must be an http:// or https:// URL with a host, got "
            f"{display_url(url)}; pass the incoming webhook URL your chat system gave you"
        )


def secrets_of(url: str) -> list[str]:
    """Every part of `url` an error must not show: the URL itself, its path, query and
    fragment, each segment of its path and each value of its query (as written and
    percent-decoded), its user name and password."""
    text = url.strip()
    try:
        parts = urlsplit(text)
    except ValueError:
        return [text]
    found = [text, parts.path, parts.query, parts.fragment, *redact.url_secrets(text)]
    found += parts.path.split("/") + parts.query.replace(";", "&").split("&")
    found += [v for item in parts.query.split("&") for v in item.split("=")[1:]]
    found += [unquote(s) for s in list(found)]
    return [s for s in found if s]


def scrub(text: str, url: str) -> str:
    """`text` (a server's answer, a library's message) with every secret part of `url`
    blanked out (`secrets_of`), made safe for a terminal and cut short."""
    return terminal(redact.scrub(text, secrets_of(url)), _SHOWN)


def post(
    url: str, text: str, timeout_s: float = 10.0, payload: Mapping[str, Any] | None = None
) -> None:
    """Send `{"text": text}` (or `payload`) as JSON, the whole exchange within `timeout_s`;
    raise `GpuauditError` with one clear line when the URL is not http(s), the server cannot
    be reached, does not answer in time, or answers anything but 2xx (`Transient` where trying
    again may help)."""
    where = display_url(url)
    try:
        scheme = urlsplit(url.strip()).scheme.lower()
    except ValueError:
        scheme = ""
    if scheme not in ("http", "https"):
        raise GpuauditError(
            f"--webhook must be an http:// or https:// URL, got {where}; pass the incoming "
            "webhook URL your chat system gave you"
        )
    try:
        sent = {"text": text} if payload is None else payload
        status, body = transfer.within(timeout_s, lambda d: _exchange(url, sent, timeout_s, d))
    except (transfer.DeadlineExceeded, httpx.TimeoutException):
        raise Transient(
            f"webhook {where} did not answer within {timeout_s:g} s; the report was written, "
            "but the summary was not posted"
        ) from None
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        why = scrub(str(exc), url) or type(exc).__name__
        error = Transient if isinstance(exc, httpx.TransportError) else GpuauditError
        raise error(
            f"cannot post to webhook {where}: {why}; check the URL and that this machine can "
            "reach it"
        ) from None
    if not 200 <= status < 300:
        said = scrub(body.strip(), url) if body.strip() else ""
        shown = f" ({said})" if said else ""
        error = Transient if status == 429 or status >= 500 else GpuauditError
        raise error(
            f"webhook {where} answered HTTP {status}{shown}; the summary was not posted (check "
            "that the webhook URL is current)"
        )


def _exchange(
    url: str, payload: Mapping[str, Any], timeout_s: float, deadline: transfer.Deadline
) -> tuple[int, str]:
    """The request, on `transfer.within`'s thread: the status, and for an answer that is not a
    success the start of its body as text."""
    with (
        httpx.Client(timeout=timeout_s, follow_redirects=False) as client,
        client.stream(
            "POST",
            url.strip(),
            json=dict(payload),
            headers={"User-Agent": "gpuaudit", "Accept-Encoding": "identity"},
        ) as resp,
    ):
        if 200 <= resp.status_code < 300:
            return resp.status_code, ""
        head = _head(resp.iter_raw(), resp.headers.get("content-encoding", ""), deadline)
        return resp.status_code, head.decode("utf-8", "replace")


def _head(chunks: Iterable[bytes], encoding: str, deadline: transfer.Deadline) -> bytes:
    """At most `ANSWER_BYTES` of a body, decompressed (gzip or deflate) a bounded piece at a
    time; what lies beyond is never read. A body in another encoding, or corrupt, gives what
    was decoded before it."""
    enc = encoding.strip().lower()
    wbits = {"gzip": 31, "x-gzip": 31, "deflate": 47}.get(enc)
    if enc not in ("", "identity") and wbits is None:
        return b""
    inflater = zlib.decompressobj(wbits) if wbits is not None else None
    out = bytearray()
    for chunk in chunks:
        deadline.check()
        room = ANSWER_BYTES - len(out)
        if inflater is None:
            out += chunk[:room]
        else:
            try:
                out += inflater.decompress(chunk, room)
            except zlib.error:
                break
            if inflater.eof:
                break
        if len(out) >= ANSWER_BYTES:
            break
    return bytes(out)
