"""Error messages from the Kubernetes API that are safe to show: one short line each, built from
status codes, the server's `Status` message and the kind of network failure, never from request
headers, with every known secret blanked out as a last guard."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

_MAX_MESSAGE = 240


def clip(text: str) -> str:
    """`text` on one line, cut to a readable length."""
    text = " ".join(text.split())
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every one of `secrets` replaced by `***` (longest first, as given)."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def status_message(exc: Any) -> str:
    """The `message` of the server's `Status` answer, else the HTTP reason; one short line."""
    body = getattr(exc, "body", None)
    message = ""
    if isinstance(body, (str, bytes)) and body:
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            message = str(doc.get("message") or doc.get("reason") or "")
    if not message:
        message = str(getattr(exc, "reason", "") or "")
        if getattr(exc, "status", None) == 0:
            message = network_reason(exc)
    return clip(message or f"HTTP {getattr(exc, 'status', '?')}")


def network_reason(exc: BaseException) -> str:
    """Say what went wrong on the wire, without URLs' queries or any header."""
    import ssl

    from urllib3 import exceptions as u3

    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, u3.MaxRetryError) and cur.reason is not None:
            cur = cur.reason
            continue
        if isinstance(cur, ssl.SSLCertVerificationError):
            return f"TLS certificate verification failed ({clip(cur.verify_message or str(cur))})"
        if isinstance(cur, u3.SSLError):
            inner = cur.__cause__ or (cur.args[0] if cur.args else None)
            if isinstance(inner, BaseException):
                cur = inner
                continue
            return f"TLS failed ({clip(_strip_ssl(str(cur)))})"
        if isinstance(cur, ssl.SSLError):
            return f"TLS failed ({clip(_strip_ssl(cur.reason or str(cur)))})"
        # NameResolutionError < NewConnectionError < ConnectTimeoutError: most specific first.
        if isinstance(cur, u3.NameResolutionError):
            return "the host name does not resolve"
        if isinstance(cur, u3.NewConnectionError):
            if isinstance(cur.__cause__, OSError) and cur.__cause__.strerror:
                return cur.__cause__.strerror.lower()
            m = re.search(r"\[Errno -?\d+\] ([^)\]]+)", str(cur))
            return m.group(1).lower() if m else "the connection failed"
        if isinstance(cur, u3.ConnectTimeoutError):
            return "the connection timed out"
        if isinstance(cur, u3.ReadTimeoutError):
            return "no answer before the timeout"
        if isinstance(cur, u3.ProxyError):
            return "the proxy failed"
        if isinstance(cur, u3.ProtocolError):
            return "the connection broke off"
        if type(cur).__name__ == "ApiException" and getattr(cur, "status", None) == 0:
            # The client turns some TLS failures into status-0 ApiExceptions.
            reason = str(getattr(cur, "reason", "") or "")
            return f"TLS failed ({clip(_strip_ssl(reason.splitlines()[-1] if reason else ''))})"
        if isinstance(cur, OSError) and cur.strerror:
            return cur.strerror.lower()
        nxt = cur.__cause__ or cur.__context__
        if nxt is None:
            break
        cur = nxt
    return type(exc).__name__


def _strip_ssl(text: str) -> str:
    return re.sub(r"\s*\(_ssl\.c:\d+\)", "", text).strip()
