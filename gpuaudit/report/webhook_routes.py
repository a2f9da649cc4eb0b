"""`--webhook` routed by owner: the fleet summary to the `--webhook` URL, and to each owner the
`[webhooks]` table of `gpuaudit.toml` names a URL for, a message of their own findings.

```toml
[webhooks]
ml-platform = "GPUAUDIT_WEBHOOK_ML_PLATFORM"                      # Slack's shape
search = { url_env = "GPUAUDIT_WEBHOOK_SEARCH", format = "teams" }
```

Keys are owners as findings name them (`findings[].owner.name`). A webhook URL is a credential,
and a `gpuaudit.toml` is easily committed, so the file names the environment variable that holds
each URL (as `--webhook` is read from a flag or `GPUAUDIT_WEBHOOK` only): a value is that name, or
a table with `url_env` and `format` (`slack`, for a Slack incoming webhook or one that accepts its
shape, or `teams`, for a Microsoft Teams Workflows webhook, which takes an Adaptive Card). The
table is read only with `--webhook`, so that a `gpuaudit.toml` kept in a repository posts
nothing from a laptop's run, and a variable it names that is unset is an error before the scan.

Each owner's message names the cluster and window, their findings' count and the GPU-hours and
cost they waste (counted as in the report's total), and their first `TOP` findings in rank order,
each cut to `LINE_CHARS`; the text is at most `TEXT_CHARS` (a Slack section block takes 3,000
characters; a Teams message 28 KB). The shapes:

- Slack: `{"text": fallback, "blocks": [header (plain_text), section (mrkdwn)]}`, with `&`, `<`
  and `>` escaped as Slack's formatting reference asks (names from the cluster are data);
- Teams: `{"type": "message", "attachments": [{"contentType":
  "application/vnd.microsoft.card.adaptive", "content": {AdaptiveCard 1.4 with TextBlocks}}]}`.

Every post is bounded by one deadline shared by all of them (`DEADLINE_S`, the reports being
written before any is posted): each is tried up to `TRIES` times (tenacity) while the deadline
allows, when it failed in a way that may pass (no answer, no connection, HTTP 429 or 5xx), and
the posts left when it has passed are reported as not posted. No URL reaches a payload, and what
is said of one shows only its scheme and host (`webhook.display_url`): URLs are secrets.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import tenacity

from gpuaudit.audit.assemble import AuditResult
from gpuaudit.core.errors import ConfigError, GpuauditError
from gpuaudit.report import webhook
from gpuaudit.report.markdown import summary as markdown_summary
from gpuaudit.report.text import money, num, plural, terminal, window_text

STYLES = ("slack", "teams")
"""The payload shapes a route may ask for."""
ROUTES = 200
"""The most routes a `[webhooks]` table may hold."""
TOP = 10
"""Findings listed in an owner's message."""
LINE_CHARS = 300
"""The most characters of one finding's line."""
TEXT_CHARS = 2_900
"""The most characters of a message's text."""
DEADLINE_S = 30.0
"""Seconds all the posts of one run may take together."""
TRIES = 3
"""Tries of one post whose failure may pass."""


@dataclass(frozen=True)
class Route:
    """Where one owner's findings go."""

    owner: str
    url: str
    """The webhook URL: a secret, never shown whole."""
    style: str = "slack"
    """`slack` or `teams`."""


def parse(table: object, env: Mapping[str, str]) -> tuple[Route, ...]:
    """The `[webhooks]` table of `gpuaudit.toml` (absent: none), each URL read from the
    variable of `env` it names and checked; a `ConfigError` names the owner and shows no more
    of a URL than its scheme and host."""
    if table is None:
        return ()
    if not isinstance(table, Mapping):
        raise ConfigError("[webhooks] must be a table of owner = URL")
    if len(table) > ROUTES:
        raise ConfigError(f"[webhooks] holds {len(table):,} owners, more than {ROUTES}")
    out = []
    for owner, value in table.items():
        name = terminal(str(owner), 80)
        if not owner or len(owner) > 253:
            raise ConfigError(f"[webhooks] {name!r}: an owner name is 1 to 253 characters")
        var, style = (value, "slack") if isinstance(value, str) else _table(name, value)
        if not _ENV_NAME.fullmatch(var):
            raise ConfigError(
                f"[webhooks] {name}: name the environment variable that holds the URL (a "
                f"webhook URL is a credential, kept out of the file), e.g. "
                f'{{ url_env = "GPUAUDIT_WEBHOOK_{_env_part(name)}" }}'
            )
        url = env.get(var, "")
        if not url:
            raise ConfigError(f"[webhooks] {name}: the environment variable {var} is not set")
        try:
            webhook.check_url(url)
        except ConfigError:
            raise ConfigError(
                f"[webhooks] {name}: the URL must be http:// or https:// with a host, got "
                f"{webhook.display_url(url)}"
            ) from None
        out.append(Route(str(owner), url, style))
    return tuple(out)


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
"""An environment variable's name."""


def _env_part(name: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_")[:40] or "OWNER"


def _table(name: str, value: object) -> tuple[str, str]:
    if not isinstance(value, Mapping) or not isinstance(value.get("url_env"), str):
        raise ConfigError(
            f"[webhooks] {name} must name an environment variable, or be "
            "{ url_env = ..., format = ... }"
        )
    extra = set(value) - {"url_env", "format"}
    style = value.get("format", "slack")
    if extra or style not in STYLES:
        raise ConfigError(
            f"[webhooks] {name}: a table holds url_env and format ({' or '.join(STYLES)}) only"
        )
    return str(value["url_env"]), str(style)


def owner_message(result: AuditResult, owner: str) -> tuple[str, list[str]]:
    """An owner's message: its title and its lines (their figures, then their first `TOP`
    findings in rank order, and how many more), cut to `TEXT_CHARS` in all."""
    mine = [f for f in result.findings if f.owner is not None and f.owner.name == owner]
    counted = [f for f in mine if f.counted]
    hours = sum(f.impact.gpu_hours for f in counted)
    cost = sum(f.impact.cost for f in counted)
    cur = result.summary.currency
    title = terminal(f"GPU audit of {result.cluster or 'the cluster'} for {owner}", 150)
    lines = [
        terminal(window_text(result), LINE_CHARS),
        f"{plural(len(mine), 'finding')}; {num(hours)} wasted GPU-hours ({money(cost, cur)}) "
        "counted in the report's total."
        if mine
        else "No findings.",
    ]
    used = len(title) + sum(len(line) + 1 for line in lines)
    shown = 0
    for f in mine[:TOP]:
        line = terminal(f"{f.severity.value.upper()} {f.code}: {f.message}", LINE_CHARS)
        if used + len(line) + 1 > TEXT_CHARS - 60:
            break
        lines.append(line)
        used += len(line) + 1
        shown += 1
    if len(mine) > shown:
        lines.append(f"... and {len(mine) - shown:,} more in the report.")
    return title, lines


def payload(style: str, title: str, lines: Sequence[str]) -> dict[str, Any]:
    """The JSON body of a message in `style`."""
    if style == "teams":
        body = [{"type": "TextBlock", "text": title, "weight": "Bolder", "wrap": True}]
        body += [{"type": "TextBlock", "text": line, "wrap": True} for line in lines]
        card = {
            "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
            "type": "AdaptiveCard",
            "version": "1.4",
            "body": body,
        }
        attachment = {
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": None,
            "content": card,
        }
        return {"type": "message", "attachments": [attachment]}
    text = "\n".join(_slack(line) for line in lines)
    return {
        "text": _slack(f"{title}: {lines[1] if len(lines) > 1 else ''}"),
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": title}},
            {"type": "section", "text": {"type": "mrkdwn", "text": text[:TEXT_CHARS]}},
        ],
    }


def _slack(text: str) -> str:
    """`text` with the three characters Slack's mrkdwn reads as control ones escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def post_all(
    result: AuditResult,
    url: str,
    routes: Sequence[Route],
    deadline_s: float = DEADLINE_S,
) -> list[str]:
    """Post the fleet summary to `url` and each route's message, all within `deadline_s`;
    what could not be posted, one sentence each (`Outcome.failures`)."""
    end = time.monotonic() + deadline_s
    sends: list[tuple[str, str, dict[str, Any] | None, str]] = [
        (url, markdown_summary(result), None, "")
    ]
    for r in routes:
        title, lines = owner_message(result, r.owner)
        sends.append((r.url, title, payload(r.style, title, lines), f"owner {r.owner}"))
    failures = []
    for i, (where, text, body, what) in enumerate(sends):
        left = end - time.monotonic()
        if left <= 0.05:
            names = ", ".join(terminal(w or "the fleet summary", 80) for *_, w in sends[i:])
            failures.append(
                f"webhooks: the {deadline_s:g} s all posts share passed; not posted: {names}"
            )
            break
        try:
            _post(where, text, body, end)
        except GpuauditError as exc:
            failures.append(f"{what}: {exc}" if what else str(exc))
    return failures


def _post(url: str, text: str, body: dict[str, Any] | None, end: float) -> None:
    """One post, tried again while it fails in a way that may pass and `end` allows."""
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(TRIES),
        wait=tenacity.wait_exponential(multiplier=0.25, max=2.0),
        retry=tenacity.retry_if_exception(
            lambda e: isinstance(e, webhook.Transient) and time.monotonic() < end
        ),
        reraise=True,
    )
    for attempt in retrying:
        with attempt:
            left = end - time.monotonic()
            if left <= 0.05:
                raise GpuauditError("not posted: the deadline all posts share passed")
            webhook.post(url, text, min(10.0, left), body)
