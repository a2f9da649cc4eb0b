"""`gpuaudit snapshot save` (collect live data into a snapshot file, without auditing) and
`gpuaudit snapshot show` (what a snapshot file holds)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated as A

import typer

from gpuaudit.console import style
from gpuaudit.console.params import from_environment, given, opt, option
from gpuaudit.console.style import failing
from gpuaudit.core import debuglog
from gpuaudit.sources.bounds import (
    DEFAULT_ANSWER_MIB,
    DEFAULT_OBJECTS,
    DEFAULT_PARALLEL,
    DEFAULT_QUERIES,
    DEFAULT_TIMEOUT_S,
)

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


SAVE_DOC = "Collect a snapshot from live sources and write it, without auditing."


@app.command("save", cls=style.Command, help=SAVE_DOC)
def save(
    ctx: typer.Context,
    file: A[
        Path,
        typer.Argument(help="Where to write (.json or .json.gz).", metavar="FILE", readable=False),
    ],
    no_side_file: A[
        bool, opt("--no-side-file", table=SAVE_HELP, command="snapshot_save", metavar="")
    ] = False,
    prometheus_url: A[str | None, option("prometheus_url")] = None,
    kubeconfig: A[Path | None, option("kubeconfig")] = None,
    context: A[str | None, option("context")] = None,
    namespace: A[list[str] | None, option("namespace")] = None,
    no_kubernetes: A[bool, option("no_kubernetes")] = False,
    window: A[str | None, option("window")] = None,
    end: A[str | None, option("end")] = None,
    step: A[str | None, option("step")] = None,
    max_window: A[str, option("max_window")] = "366d",
    config: A[Path | None, option("config")] = None,
    quiet: A[bool, option("quiet")] = False,
    debug: A[bool, option("debug")] = False,
    prometheus_token: A[str | None, option("prometheus_token")] = None,
    prometheus_token_file: A[Path | None, option("prometheus_token_file")] = None,
    prometheus_user: A[str | None, option("prometheus_user")] = None,
    prometheus_password: A[str | None, option("prometheus_password")] = None,
    header: A[list[str] | None, option("header")] = None,
    ca_file: A[Path | None, option("ca_file")] = None,
    client_cert: A[Path | None, option("client_cert")] = None,
    client_key: A[Path | None, option("client_key")] = None,
    insecure_skip_tls_verify: A[bool, option("insecure_skip_tls_verify")] = False,
    cluster_label: A[str | None, option("cluster_label")] = None,
    timeout: A[float, option("timeout")] = DEFAULT_TIMEOUT_S,
    max_answer_mib: A[float, option("max_answer_mib")] = DEFAULT_ANSWER_MIB,
    max_queries: A[float, option("max_queries")] = DEFAULT_QUERIES,
    parallel_queries: A[float, option("parallel_queries")] = DEFAULT_PARALLEL,
    max_objects: A[float, option("max_objects")] = DEFAULT_OBJECTS,
) -> None:
    """Collect and write a snapshot (`SAVE_DOC`). After its own, the parameters declare the
    options it shares with `scan` (those of `gpuaudit.app.options` that are not `scan_only`),
    read back as `scan` reads them."""
    from gpuaudit.app import config as configuration  # lazy, as the pipeline:
    from gpuaudit.app import pipeline  # they load pandas, which would slow `gpuaudit --help`
    from gpuaudit.console import progressbar as progress
    from gpuaudit.report.text import plural

    options = given(ctx)
    options.pop("no_side_file", None)  # this command's own, not a scan option
    if debug:
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
    file: A[Path, typer.Argument(help="A snapshot file.", metavar="FILE")],
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
    file: A[Path, typer.Argument(help="A snapshot file (format 2).", metavar="FILE")],
) -> None:
    """Write the columnar side-file of a snapshot (`INDEX_HELP`)."""
    from gpuaudit.snapshot import reader

    with failing():
        out = reader.index(file)
        sys.stderr.write(f"gpuaudit: wrote {out}\n")
