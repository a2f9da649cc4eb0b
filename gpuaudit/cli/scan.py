"""`gpuaudit scan`: every option of `gpuaudit.options`, then one call to the pipeline."""

from __future__ import annotations

import enum
import os
import sys
import textwrap

import typer

from gpuaudit import debuglog
from gpuaudit.cli.options import failing, from_environment, given, takes
from gpuaudit.options import OPTIONS


class Format(str, enum.Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"
    junit = "junit"


HELP = (
    "Audit GPU usage and print ranked findings under a fleet summary.\n\n"
    "Exit codes: 0 nothing at or above --fail-on; 1 findings at or above it (with --baseline, "
    "new or worse ones); 2 a usage error, a source that could not be read, an incomplete audit "
    "under --strict, or an audit that audited nothing (no DCGM series, every check skipped) "
    "under --strict or --fail-on. Every report (--output, --report) is written first."
)
"""The command's help, each paragraph one line (Typer keeps a docstring's line breaks)."""


@takes(*OPTIONS, format=Format)
def scan(ctx: typer.Context, **_: object) -> None:
    """Audit GPU usage (`HELP`)."""
    from gpuaudit import config as configuration  # lazy, as the pipeline:
    from gpuaudit import pipeline  # they load pandas, which would slow `gpuaudit --help`
    from gpuaudit.cli import progress

    options = given(ctx)
    if options.get("debug"):
        debuglog.configure(True)
    with failing():
        cfg = configuration.for_scan(options, from_environment(ctx))
        outcome = pipeline.run(cfg, progress=progress.for_run(cfg.quiet))
    if cfg.timings:
        sys.stderr.write(outcome.timings_line() + "\n")
    if not cfg.quiet:
        sys.stderr.write(_fit_terminal(outcome.summary_line()) + "\n")
    alarm = outcome.nothing_line()
    if alarm:  # even with --quiet: an empty audit must never pass for a healthy one
        sys.stderr.write(alarm + "\n")
    if outcome.exit_code == 2:
        sys.stderr.write(outcome.strict_line() + "\n")
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)


def _fit_terminal(line: str) -> str:
    """`line` wrapped at the terminal's width when stderr is a terminal (continuation lines
    indented by two), else as it is: a terminal shows no line wider than itself."""
    if not sys.stderr.isatty():
        return line
    try:
        width = os.get_terminal_size(sys.stderr.fileno()).columns
    except OSError:
        return line
    if width < 20:
        return line
    # Broken between its clauses where it can, else between words.
    lines: list[str] = []
    for clause in line.split("; "):
        if lines and len(lines[-1]) + 2 + len(clause) <= width:
            lines[-1] += "; " + clause
            continue
        if lines:
            lines[-1] += ";"
        first = "  " if lines else ""
        lines += textwrap.wrap(
            clause,
            width - 1,  # room for the ";"
            initial_indent=first,
            subsequent_indent="  ",
            break_on_hyphens=False,
        )
    return "\n".join(lines)
