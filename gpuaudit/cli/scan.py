"""`gpuaudit scan`: every option of `gpuaudit.options`, then one call to the pipeline."""

from __future__ import annotations

import enum
import sys

import typer

from gpuaudit import debuglog
from gpuaudit.cli.options import failing, given, takes
from gpuaudit.options import OPTIONS


class Format(str, enum.Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"
    junit = "junit"


HELP = (
    "Audit GPU usage and print ranked findings under a fleet summary.\n\n"
    "Exit codes: 0 nothing at or above --fail-on; 1 findings at or above it; 2 a usage error "
    "or a source that could not be read."
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
        cfg = configuration.for_scan(options)
        outcome = pipeline.run(cfg, progress=progress.for_run(cfg.quiet))
    if cfg.timings:
        sys.stderr.write(outcome.timings_line() + "\n")
    if not cfg.quiet:
        sys.stderr.write(outcome.summary_line() + "\n")
    if outcome.exit_code == 2:
        sys.stderr.write(outcome.strict_line() + "\n")
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)
