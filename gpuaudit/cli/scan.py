"""`gpuaudit scan`: every option of `gpuaudit.options`, then one call to the pipeline."""

from __future__ import annotations

import enum
import sys

import typer

from gpuaudit.cli.options import failing, given, progress_bar, takes
from gpuaudit.options import OPTIONS


class Format(str, enum.Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"
    junit = "junit"


@takes(*OPTIONS, format=Format)
def scan(ctx: typer.Context, **_: object) -> None:
    """Audit GPU usage and print ranked findings under a fleet summary.

    Exit codes: 0 nothing at or above --fail-on; 1 findings at or above it; 2 a usage error
    or a source that could not be read.
    """
    from gpuaudit import config as configuration  # lazy, as the pipeline:
    from gpuaudit import pipeline  # they load pandas, which would slow `gpuaudit --help`

    with failing():
        cfg = configuration.for_scan(given(ctx))
        outcome = pipeline.run(cfg, progress=None if cfg.quiet else progress_bar)
    if cfg.timings:
        sys.stderr.write(outcome.timings_line() + "\n")
    if not cfg.quiet:
        sys.stderr.write(outcome.summary_line() + "\n")
    if outcome.exit_code == 2:
        sys.stderr.write(outcome.strict_line() + "\n")
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)
