"""Renderers of an audit result. They never re-sort or re-compute.

`render` turns a result into the text of one format; the table goes to a rich console
(`print_table`) or, for a file, to plain text (`table_text`).
"""

from __future__ import annotations

import io
from collections.abc import Callable

from rich.console import Console

from gpuaudit.audit import AuditResult
from gpuaudit.report import html, json_report, junit, markdown, table

_RENDERERS: dict[str, Callable[[AuditResult], str]] = {
    "json": json_report.render,
    "markdown": markdown.render,
    "html": html.render,
    "junit": junit.render,
}
FORMATS: tuple[str, ...] = ("table", *_RENDERERS)
"""Every report format, in the order `--format` lists them."""


def render(result: AuditResult, fmt: str) -> str:
    """The report in format `fmt` (any of `FORMATS` but `table`)."""
    return _RENDERERS[fmt](result)


def print_table(result: AuditResult, console: Console) -> None:
    """The table report on a rich console (colours and width are the console's)."""
    table.print_report(result, console)


def table_text(result: AuditResult) -> str:
    """The table report as plain text, 160 columns wide, for a file."""
    buf = io.StringIO()
    table.print_report(result, Console(file=buf, width=160, no_color=True, force_terminal=False))
    return buf.getvalue()
