"""The command line: it declares commands and options and calls `gpuaudit.pipeline`.

`scan` and `snapshot save` hand the options the user gave to `gpuaudit.config`, which resolves
and validates them once; the pipeline does the work; the commands print the summary and errors.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated as A

import typer

from gpuaudit import __version__, debuglog
from gpuaudit.cli import reference, scan, scenario, snapshot
from gpuaudit.cli.options import opt

app = typer.Typer(
    name="gpuaudit",
    help="Audit GPU usage on Kubernetes: find idle and misplaced GPUs, rank them by cost, "
    "and say what to change.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    add_completion=False,
)
app.command(rich_help_panel="Audit")(scan.scan)
app.add_typer(snapshot.app, name="snapshot", rich_help_panel="Audit")
app.command(rich_help_panel="Alerts")(reference.rules)
app.command(rich_help_panel="Reference")(reference.checks)
app.command(rich_help_panel="Reference")(reference.explain)
app.command(rich_help_panel="Testing")(scenario.scenario)

__all__ = ["app", "main"]


ROOT_HELP = {
    "--version": "Print the version and exit.",
    "--debug": "Log every request to stderr (credentials redacted).",
}


def _version(value: bool) -> None:
    if value:
        print(f"gpuaudit {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: A[
        bool, opt("--version", table=ROOT_HELP, envvar=None, callback=_version, is_eager=True)
    ] = False,
    debug: A[bool, opt("--debug", table=ROOT_HELP, envvar="GPUAUDIT_DEBUG_LOG")] = False,
) -> None:
    """gpuaudit joins DCGM metrics with Kubernetes objects, finds GPU waste, ranks it by cost."""
    debuglog.configure(debug)


def main() -> None:
    """The console script: run the app; an unexpected error is one line, never a traceback."""
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("gpuaudit: interrupted\n")
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback
        if os.environ.get("GPUAUDIT_DEBUG"):
            raise
        sys.stderr.write(
            f"gpuaudit: internal error: {type(exc).__name__}: {exc}. This is a bug; rerun with "
            "GPUAUDIT_DEBUG=1 for details and report it.\n"
        )
        sys.exit(2)
