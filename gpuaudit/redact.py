"""The one place that makes URLs and HTTP headers safe to print, log and record."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

SECRET_HEADERS = frozenset({"authorization", "x-api-key", "cookie", "proxy-authorization"})
"""Header names whose values are credentials (compared in lower case)."""


def url_for_display(url: str) -> str:
    """`url` without user info, query string or fragment: safe to print and record. A URL that
    cannot be parsed is cut at the first `?` and after the last `@`."""
    text = url.strip()
    try:
        parts = urlsplit(text)
    except ValueError:
        return text.split("?")[0].split("@")[-1]
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers safe to log: credential values replaced by `<redacted>`."""
    return {k: ("<redacted>" if k.lower() in SECRET_HEADERS else v) for k, v in headers.items()}
