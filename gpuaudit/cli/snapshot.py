"""`gpuaudit snapshot save`: collect live data into a snapshot file, without auditing."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from gpuaudit.cli.options import failing, from_environment, given, progress_bar, takes
from gpuaudit.options import OPTIONS

app = typer.Typer(help="Save and inspect snapshots.", no_args_is_help=True)


@app.command("save")
@takes(*(o for o in OPTIONS if not o.scan_only))
def save(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="Where to write (.json or .json.gz).")],
    **_: object,
) -> None:
    """Collect a snapshot from live sources and write it, without auditing."""
    from gpuaudit import config as configuration  # lazy, as the pipeline:
    from gpuaudit import pipeline  # they load pandas, which would slow `gpuaudit --help`

    with failing():
        cfg = configuration.for_snapshot_save(given(ctx), from_environment(ctx))
        n = pipeline.save_snapshot(cfg, file, progress=None if cfg.quiet else progress_bar)
        if not cfg.quiet:
            sys.stderr.write(f"gpuaudit: wrote {file} ({n} Prometheus answers)\n")
