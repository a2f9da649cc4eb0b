"""`gpuaudit scan`: every option of `gpuaudit.app.options`, then one call to the pipeline."""

from __future__ import annotations

import enum

import typer

from gpuaudit.app.options import OPTIONS
from gpuaudit.console.params import from_environment, given, takes
from gpuaudit.console.style import failing, say_outcome
from gpuaudit.core import debuglog
from gpuaudit.core.gcpause import FREEZING


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
    from gpuaudit.app import config as configuration  # lazy, as the pipeline:
    from gpuaudit.app import pipeline  # they load pandas, which would slow `gpuaudit --help`
    from gpuaudit.console import progressbar as progress

    options = given(ctx)
    if options.get("debug"):
        debuglog.configure(True)
    with failing():
        cfg = configuration.for_scan(options, from_environment(ctx))
        outcome = pipeline.run(cfg, progress=progress.for_run(cfg.quiet), collector=FREEZING)
    say_outcome(outcome, quiet=cfg.quiet, timings=cfg.timings)
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)
