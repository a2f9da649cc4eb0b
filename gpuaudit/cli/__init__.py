"""The command line: it declares commands and options and calls `gpuaudit.app.pipeline`.

`scan` and `snapshot save` hand the options the user gave to `gpuaudit.app.config`, which resolves
and validates them once; the pipeline does the work; the commands print the summary and errors.
How they look on a terminal (one-line errors, help, progress) is `gpuaudit.console`'s.
"""

from __future__ import annotations

from typing import Annotated as A

import typer

from gpuaudit import __version__
from gpuaudit.cli import ack, fix, heap, reference, scan, scenario, snapshot
from gpuaudit.console import style
from gpuaudit.console.params import opt
from gpuaudit.core import debuglog

app = typer.Typer(
    name="gpuaudit",
    help="Audit GPU usage on Kubernetes: find idle and misplaced GPUs, rank them by cost, "
    "and say what to change.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    add_completion=False,
    cls=style.Group,
)
app.command(rich_help_panel="Audit", cls=style.Command, help=scan.HELP)(scan.scan)
app.command(rich_help_panel="Audit", cls=style.Command, help=fix.HELP)(fix.fix)
app.add_typer(snapshot.app, name="snapshot", rich_help_panel="Audit")
app.command(rich_help_panel="Audit", cls=style.Command, help=ack.HELP)(ack.ack)
app.command(rich_help_panel="Alerts", cls=style.Command, help=reference.RULES_DOC)(reference.rules)
app.command(rich_help_panel="Reference", cls=style.Command)(reference.checks)
app.command(rich_help_panel="Reference", cls=style.Command)(reference.explain)
app.command(rich_help_panel="Testing", cls=style.Command)(scenario.scenario)

__all__ = ["app", "main"]


ROOT_HELP = {
    "--version": "Print the version and exit.",
    "--debug": "Log every request (credentials redacted) and the samples each query read to "
    "stderr, and show the traceback of an internal error; also accepted after the command "
    "(`gpuaudit scan --debug`).",
}


def _version(value: bool) -> None:
    if value:
        print(f"gpuaudit {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: A[
        bool,
        opt(
            "--version",
            table=ROOT_HELP,
            command="",
            metavar="",
            envvar=None,
            callback=_version,
            is_eager=True,
        ),
    ] = False,
    debug: A[
        bool, opt("--debug", table=ROOT_HELP, command="", metavar="", envvar=debuglog.ENVVAR)
    ] = False,
) -> None:
    """gpuaudit joins DCGM metrics with Kubernetes objects, finds GPU waste, ranks it by cost."""
    debuglog.configure(debug)


def main() -> None:
    """The console script (`gpuaudit.console.style.run`): a process of one command, which
    keeps the memory it frees for its own reuse (`gpuaudit.cli.heap`)."""
    heap.keep_freed_memory()
    style.run(app)
