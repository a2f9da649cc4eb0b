"""`gpuaudit snapshot save`: collect live data into a snapshot file, without auditing."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated as A

import typer

from gpuaudit.cli.options import failing, given, opt, progress_bar

app = typer.Typer(help="Save and inspect snapshots.", no_args_is_help=True)


@app.command("save")
def save(  # the live options of `scan`, declared the same way; `given` reads them by name
    ctx: typer.Context,
    file: A[Path, typer.Argument(help="Where to write (.json or .json.gz).")],
    prometheus_url: A[str | None, opt("--prometheus-url")] = None,
    kubeconfig: A[Path | None, opt("--kubeconfig")] = None,
    context: A[str | None, opt("--context")] = None,
    namespace: A[list[str] | None, opt("--namespace", "-n")] = None,
    no_kubernetes: A[bool, opt("--no-kubernetes")] = False,
    window: A[str | None, opt("--window")] = None,
    end: A[str | None, opt("--end")] = None,
    step: A[str | None, opt("--step")] = None,
    config: A[Path | None, opt("--config")] = None,
    quiet: A[bool, opt("--quiet", "-q")] = False,
    prometheus_token: A[str | None, opt("--prometheus-token", show_default=False)] = None,
    prometheus_token_file: A[Path | None, opt("--prometheus-token-file")] = None,
    prometheus_user: A[str | None, opt("--prometheus-user")] = None,
    prometheus_password: A[str | None, opt("--prometheus-password", show_default=False)] = None,
    header: A[list[str] | None, opt("--header", "-H")] = None,
    ca_file: A[Path | None, opt("--ca-file")] = None,
    client_cert: A[Path | None, opt("--client-cert")] = None,
    client_key: A[Path | None, opt("--client-key")] = None,
    insecure_skip_tls_verify: A[bool, opt("--insecure-skip-tls-verify")] = False,
    cluster_label: A[str | None, opt("--cluster-label")] = None,
    timeout: A[float, opt("--timeout")] = 120.0,
) -> None:
    """Collect a snapshot from live sources and write it, without auditing."""
    from gpuaudit import config as configuration  # lazy, as the pipeline:
    from gpuaudit import pipeline  # they load pandas, which would slow `gpuaudit --help`

    with failing():
        cfg = configuration.for_snapshot_save(given(ctx))
        n = pipeline.save_snapshot(cfg, file, progress=None if cfg.quiet else progress_bar)
        if not cfg.quiet:
            sys.stderr.write(f"gpuaudit: wrote {file} ({n} Prometheus answers)\n")
