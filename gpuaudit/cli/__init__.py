"""The command line: it declares commands and options and calls `gpuaudit.pipeline`.

`scan` and `snapshot save` hand the options the user gave to `gpuaudit.config`, which resolves
and validates them once; the pipeline does the work; the commands print the summary and errors.
Usage errors are gpuaudit's own one-line errors (`gpuaudit.cli.style`).
"""

from __future__ import annotations

import sys
from typing import Annotated as A
from typing import Any

import typer

from gpuaudit import __version__, debuglog
from gpuaudit.cli import reference, scan, scenario, snapshot, style
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
    cls=style.Group,
)
app.command(rich_help_panel="Audit", cls=style.Command, help=scan.HELP)(scan.scan)
app.add_typer(snapshot.app, name="snapshot", rich_help_panel="Audit")
app.command(rich_help_panel="Alerts", cls=style.Command, help=reference.RULES_DOC)(reference.rules)
app.command(rich_help_panel="Reference", cls=style.Command)(reference.checks)
app.command(rich_help_panel="Reference", cls=style.Command)(reference.explain)
app.command(rich_help_panel="Testing", cls=style.Command)(scenario.scenario)

__all__ = ["app", "environment", "environment_table", "main"]


ROOT_HELP = {
    "--version": "Print the version and exit.",
    "--debug": "Log every request to stderr (credentials redacted), and show the traceback of "
    "an internal error; also accepted after the command (`gpuaudit scan --debug`).",
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
    """The console script: run the app; an unexpected error is one line, never a traceback
    (unless `--debug` asks for it)."""
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("gpuaudit: interrupted\n")
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback
        if debuglog.enabled():
            raise
        sys.stderr.write(
            f"gpuaudit: internal error: {type(exc).__name__}: {exc}. This is a bug; rerun with "
            f"--debug (or {debuglog.ENVVAR}=1) for the traceback, and report it.\n"
        )
        sys.exit(2)


def environment() -> dict[str, list[tuple[str, str]]]:
    """Every environment variable the commands read: variable -> (command, flag) pairs, the
    root command as `gpuaudit`."""
    found: dict[str, list[tuple[str, str]]] = {}

    def walk(cmd: Any, path: str) -> None:
        for param in cmd.params:
            if param.param_type_name == "option" and isinstance(param.envvar, str):
                found.setdefault(param.envvar, []).append((path, param.opts[0]))
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "gpuaudit")
    return found


def environment_table() -> str:
    """The README's table of environment variables, one row per command (generated, so that
    it cannot drift from the options)."""
    rows: dict[str, list[str]] = {}
    for var, uses in environment().items():
        for command in sorted({c for c, _ in uses}):
            rows.setdefault(command, []).append(var)
    lines = ["| command | environment variables (one per option, `GPUAUDIT_DEBUG` for all) |"]
    lines.append("|---|---|")
    for command, names in rows.items():
        shown = [n for n in names if n != debuglog.ENVVAR] or names
        lines.append(f"| `{command}` | {', '.join(f'`{n}`' for n in shown)} |")
    return "\n".join(lines) + "\n"
