"""Renderers of an audit result, and the registry of report formats. Renderers never re-sort
or re-compute: they show the result in the order and with the figures the audit computed.

`FORMATS` maps each format's name to its `ReportFormat`, in the order `--format` lists them.
`render(result, fmt)` writes any format as text; `print_table(result, console)` prints the
terminal table to a Rich console, and `table_text(result, width)` is that table as plain text.
Text every format writes the same way (numbers, percentages, untrusted names) lives in
`gpuaudit.report.text`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from gpuaudit.audit.assemble import AuditResult
from gpuaudit.report import focus, html, json_report, junit, markdown, showback_csv, table
from gpuaudit.report.renderer import ReportFormat
from gpuaudit.report.table import print_table, table_text

FORMATS: Mapping[str, ReportFormat] = MappingProxyType(
    {
        f.name: f
        for f in (
            table.FORMAT,
            json_report.FORMAT,
            markdown.FORMAT,
            html.FORMAT,
            junit.FORMAT,
            showback_csv.FORMAT,
            focus.FORMAT,
        )
    }
)
"""Every report format by name, in the order `--format` lists them."""


def render(result: AuditResult, fmt: str) -> str:
    """The report in format `fmt` as text, exactly as written to stdout or `--output`. For
    `table` this is `table_text(result)`; print the table to a terminal with `print_table`."""
    found = FORMATS.get(fmt)
    if found is None:
        raise ValueError(f"unknown report format {fmt!r}; known: {', '.join(FORMATS)}")
    return found.render(result)


__all__ = ["FORMATS", "ReportFormat", "print_table", "render", "table_text"]
