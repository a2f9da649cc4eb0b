"""Post a message to a Slack-compatible incoming webhook (Slack, Mattermost, Rocket.Chat and
others that accept `{"text": ...}`).

Webhook URLs carry their secret in the path or query, so nothing this module says (errors
included) shows more of the URL than `scheme://host[:port]`.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from gpuaudit.core.errors import GpuauditError
from gpuaudit.report.text import terminal


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


def _scrub(text: str, url: str) -> str:
    """Drop anything of the URL beyond its host from a message (servers and libraries echo
    URLs back)."""
    parts = urlsplit(url.strip())
    out = text
    for secret in (url.strip(), parts.path, parts.query, parts.fragment, parts.password or ""):
        if len(secret) > 1:
            out = out.replace(secret, "…")
    return terminal(out, 200)


def post(url: str, text: str, timeout_s: float = 10.0) -> None:
    """Send `{"text": text}` as JSON; raise `GpuauditError` with one clear line when the URL is
    not http(s), the server cannot be reached, or it answers anything but 2xx."""
    import httpx

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
        resp = httpx.post(
            url.strip(),
            json={"text": text},
            timeout=timeout_s,
            follow_redirects=False,
            headers={"User-Agent": "gpuaudit"},
        )
    except httpx.TimeoutException:
        raise GpuauditError(
            f"webhook {where} did not answer within {timeout_s:g} s; the report was written, "
            "but the summary was not posted"
        ) from None
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        why = _scrub(str(exc), url) or type(exc).__name__
        raise GpuauditError(
            f"cannot post to webhook {where}: {why}; check the URL and that this machine can "
            "reach it"
        ) from None
    if not 200 <= resp.status_code < 300:
        body = _scrub(resp.text.strip(), url) if resp.text else ""
        said = f" ({body})" if body else ""
        raise GpuauditError(
            f"webhook {where} answered HTTP {resp.status_code}{said}; the summary was not "
            "posted (check that the webhook URL is current)"
        )
