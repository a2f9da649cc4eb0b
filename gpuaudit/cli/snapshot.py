"""`gpuaudit snapshot save`: collect live data into a snapshot file, without auditing."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from gpuaudit.cli.options import (
    CaFile,
    ClientCert,
    ClientKey,
    ClusterLabel,
    ConfigFile,
    Context,
    End,
    Headers,
    Insecure,
    Kubeconfig,
    Namespaces,
    NoKube,
    PromPassword,
    PromToken,
    PromTokenFile,
    PromUrl,
    PromUser,
    Quiet,
    Step,
    Timeout,
    Window,
    failing,
    given,
    progress_bar,
)

app = typer.Typer(help="Save and inspect snapshots.", no_args_is_help=True)


@app.command("save")
def save(  # one parameter per option; the values travel by name via `given`
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="Where to write (.json or .json.gz).")],
    prometheus_url: PromUrl = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespaces = None,
    no_kubernetes: NoKube = False,
    window: Window = None,
    end: End = None,
    step: Step = None,
    config: ConfigFile = None,
    quiet: Quiet = False,
    prometheus_token: PromToken = None,
    prometheus_token_file: PromTokenFile = None,
    prometheus_user: PromUser = None,
    prometheus_password: PromPassword = None,
    header: Headers = None,
    ca_file: CaFile = None,
    client_cert: ClientCert = None,
    client_key: ClientKey = None,
    insecure_skip_tls_verify: Insecure = False,
    cluster_label: ClusterLabel = None,
    timeout: Timeout = 120.0,
) -> None:
    """Collect a snapshot from live sources and write it, without auditing."""
    # Lazy: the pipeline loads pandas and the checks, which would slow `gpuaudit --help`.
    from gpuaudit import config as configuration
    from gpuaudit import pipeline

    with failing():
        cfg = configuration.for_snapshot_save(given(ctx))
        n = pipeline.save_snapshot(cfg, file, progress=None if cfg.quiet else progress_bar)
        if not cfg.quiet:
            sys.stderr.write(f"gpuaudit: wrote {file} ({n} Prometheus answers)\n")
