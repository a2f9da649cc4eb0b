"""`gpuaudit snapshot save` (collect live data into a snapshot file, without auditing) and
`gpuaudit snapshot show` (what a snapshot file holds)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from gpuaudit.app.options import OPTIONS
from gpuaudit.console import style
from gpuaudit.console.params import from_environment, given, opt, takes
from gpuaudit.console.style import failing
from gpuaudit.core import debuglog

app = typer.Typer(
    help="Save snapshots of live data, and show what a snapshot holds.",
    no_args_is_help=True,
    cls=style.Group,
)


SAVE_HELP = {
    "--no-side-file": (
        "Do not write the columnar side-file (FILE.columns) beside the snapshot. It lets "
        "every scan of the snapshot skip parsing its text, and takes about four times the "
        "disk of a gzipped snapshot."
    )
}


@app.command("save", cls=style.Command)
@takes(*(o for o in OPTIONS if not o.scan_only))
def save(
    ctx: typer.Context,
    file: Annotated[
        Path, typer.Argument(help="Where to write (.json or .json.gz).", metavar="FILE")
    ],
    no_side_file: Annotated[
        bool,
        opt("--no-side-file", table=SAVE_HELP, command="snapshot_save", metavar=""),
    ] = False,
    **_: object,
) -> None:
    """Collect a snapshot from live sources and write it, without auditing."""
    from gpuaudit.app import config as configuration  # lazy, as the pipeline:
    from gpuaudit.app import pipeline  # they load pandas, which would slow `gpuaudit --help`
    from gpuaudit.console import progressbar as progress
    from gpuaudit.report.text import plural

    options = given(ctx)
    options.pop("no_side_file", None)  # this command's own, not a scan option
    if options.get("debug"):
        debuglog.configure(True)
    with failing():
        cfg = configuration.for_snapshot_save(options, from_environment(ctx))
        n = pipeline.save_snapshot(
            cfg, file, progress=progress.for_run(cfg.quiet), side_file=not no_side_file
        )
        if not cfg.quiet:
            side = "" if no_side_file else f" and its side-file {file}.columns"
            sys.stderr.write(f"gpuaudit: wrote {file} ({plural(n, 'Prometheus answer')}){side}\n")


SHOW_HELP = (
    "Print what a snapshot holds: cluster, window, source, queries and their answers, "
    "Kubernetes objects, and whether every source answered in full."
)


@app.command("show", cls=style.Command, help=SHOW_HELP)
def show(
    file: Annotated[Path, typer.Argument(help="A snapshot file.", metavar="FILE")],
) -> None:
    """Print what a snapshot holds (`SHOW_HELP`)."""
    from gpuaudit.console import progressbar as progress
    from gpuaudit.console import (
        show as snapshot_info,  # lazy: it loads numpy, which would slow `--help`
    )

    with failing(), progress.for_run(False).stage("loading the snapshot", "bytes") as tick:
        text = snapshot_info.describe(file, progress=tick)
    sys.stdout.write(text)


INDEX_HELP = (
    "Write a snapshot's columnar side-file (FILE.columns) beside it: the answers parsed once "
    "into arrays, so that later scans of the same file skip parsing its text. The snapshot "
    "stays the record; a side-file that does not match it is passed over."
)


@app.command("index", cls=style.Command, help=INDEX_HELP)
def index(
    file: Annotated[Path, typer.Argument(help="A snapshot file (format 2).", metavar="FILE")],
) -> None:
    """Write the columnar side-file of a snapshot (`INDEX_HELP`)."""
    from gpuaudit.snapshot import reader

    with failing():
        out = reader.index(file)
        sys.stderr.write(f"gpuaudit: wrote {out}\n")
