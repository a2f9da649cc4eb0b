"""`gpuaudit scan`: its options, then one call to the pipeline."""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated as A

import typer

from gpuaudit.cli.options import failing, given, opt, progress_bar


class Format(str, enum.Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"
    junit = "junit"


def scan(  # one parameter per option, in the order of `--help`; `given` reads them by name
    ctx: typer.Context,
    demo: A[bool, opt("--demo")] = False,
    snapshot: A[Path | None, opt("--snapshot")] = None,
    prometheus_url: A[str | None, opt("--prometheus-url")] = None,
    kubeconfig: A[Path | None, opt("--kubeconfig")] = None,
    context: A[str | None, opt("--context")] = None,
    namespace: A[list[str] | None, opt("--namespace", "-n")] = None,
    no_kubernetes: A[bool, opt("--no-kubernetes")] = False,
    window: A[str | None, opt("--window")] = None,
    end: A[str | None, opt("--end")] = None,
    step: A[str | None, opt("--step")] = None,
    format: A[Format, opt("--format", "-f")] = Format.table,
    output: A[Path | None, opt("--output", "-o")] = None,
    fail_on: A[str, opt("--fail-on")] = "none",
    config: A[Path | None, opt("--config")] = None,
    set_: A[list[str] | None, opt("--set")] = None,
    topology: A[Path | None, opt("--topology")] = None,
    strict: A[bool, opt("--strict")] = False,
    baseline: A[Path | None, opt("--baseline")] = None,
    previous: A[Path | None, opt("--previous")] = None,
    group_by_label: A[str | None, opt("--group-by-label")] = None,
    webhook: A[str | None, opt("--webhook", show_default=False)] = None,
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
