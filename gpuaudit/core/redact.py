"""The one place that makes URLs and HTTP headers safe to print, log and record."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, urlsplit, urlunsplit

REDACTED = "<redacted>"
"""What a secret is replaced by."""

HARMLESS_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "accept-language",
        "connection",
        "content-encoding",
        "content-length",
        "content-type",
        "host",
        "transfer-encoding",
        "user-agent",
    }
)
"""Header names whose values are shown in logs (compared in lower case). Every other header's
value may be a credential (`Authorization`, `X-Auth-Token`, `Api-Key`, `PRIVATE-TOKEN`, a
tenant header that doubles as one ...) and is never shown."""

_MIN_SECRET = 6
"""Shorter strings are not blanked out of messages: they would mangle ordinary words."""

_AUTH_SCHEMES = frozenset({"basic", "bearer", "digest", "negotiate", "token", "apikey"})
"""Words of an `Authorization` value that name the scheme, not the credential."""


def url_for_display(url: str) -> str:
    """`url` without user info, query string or fragment: safe to print and record. A URL that
    cannot be parsed is cut at the first `?` or `#` and after the last `@`."""
    text = url.strip()
    try:
        parts = urlsplit(text)
    except ValueError:
        return text.split("?")[0].split("#")[0].split("@")[-1]
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers safe to log: every value but those of `HARMLESS_HEADERS` replaced by
    `<redacted>`."""
    return {k: (v if k.lower() in HARMLESS_HEADERS else REDACTED) for k, v in headers.items()}


def url_secrets(url: str) -> list[str]:
    """The parts of `url` that may be credentials: the user info's name and password and every
    query-parameter value (`?access_token=...`)."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return []
    found = [parts.username or "", parts.password or ""]
    found += [v for _, v in parse_qsl(parts.query, keep_blank_values=True)]
    return [s for s in found if s]


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """The header values `redact_headers` hides, and each word of them (`Bearer <token>`: the
    token alone must go too)."""
    found: list[str] = []
    for k, v in headers.items():
        if k.lower() in HARMLESS_HEADERS or not v:
            continue
        found.append(v)
        found.extend(w for w in v.split() if w.lower() not in _AUTH_SCHEMES)
    return found


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret of `secrets` at least a few characters long replaced by
    `<redacted>`, the longest first."""
    for s in sorted({s for s in secrets if len(s) >= _MIN_SECRET}, key=len, reverse=True):
        text = text.replace(s, REDACTED)
    return text
