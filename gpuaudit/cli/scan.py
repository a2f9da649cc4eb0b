"""`gpuaudit scan`: its options, then one call to the pipeline."""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated

import typer

from gpuaudit.cli.options import (
    CONFIG,
    OUTPUT,
    SOURCE,
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
    opt,
    progress_bar,
)


class Format(str, enum.Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"
    junit = "junit"


Demo = Annotated[bool, opt("--demo", "Audit the bundled demo cluster (no cluster needed).", SOURCE)]
Snapshot = Annotated[Path | None, opt("--snapshot", "Audit a saved snapshot file.", SOURCE)]
Fmt = Annotated[Format, opt("--format", "Report format.", OUTPUT, "-f")]
Output = Annotated[
    Path | None, opt("--output", "Write the report to this file instead of stdout.", OUTPUT, "-o")
]
FailOn = Annotated[
    str,
    opt(
        "--fail-on",
        "Exit 1 when a finding is at or above this severity: critical, high, medium, low, info, "
        "or none.",
        OUTPUT,
    ),
]
Sets = Annotated[
    list[str] | None,
    opt(
        "--set",
        "Override a check threshold, e.g. --set idle_tail_hours=12 (repeatable; "
        "`gpuaudit explain CODE` states each check's settings).",
        CONFIG,
    ),
]
Topology = Annotated[
    Path | None,
    opt(
        "--topology",
        "Folder of `nvidia-smi topo -m` outputs, one per node (<node>.txt) or per product "
        "(<nvidia.com/gpu.product>.txt), for GPU030.",
        CONFIG,
    ),
]
Strict = Annotated[
    bool,
    opt(
        "--strict",
        "Exit 2 when any source answered only in part (the report says what is missing).",
        OUTPUT,
    ),
]
Baseline = Annotated[
    Path | None,
    opt(
        "--baseline",
        "An earlier JSON report: mark findings new, worse or unchanged, list the resolved ones, "
        "and let only new or worse findings drive --fail-on (for CI).",
        OUTPUT,
    ),
]
Previous = Annotated[
    Path | None,
    opt(
        "--previous",
        "Last week's JSON report: show the trend (new, resolved, better, worse) without "
        "changing the exit code (for cron reports).",
        OUTPUT,
    ),
]
GroupBy = Annotated[
    str | None,
    opt("--group-by-label", "Also break waste down by this pod label, e.g. team.", OUTPUT),
]
Webhook = Annotated[
    str | None,
    opt(
        "--webhook",
        "Post the Markdown summary to this Slack-compatible incoming webhook URL.",
        OUTPUT,
        show_default=False,
    ),
]


def scan(  # one parameter per option; the values travel by name via `given`
    ctx: typer.Context,
    demo: Demo = False,
    snapshot: Snapshot = None,
    prometheus_url: PromUrl = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespaces = None,
    no_kubernetes: NoKube = False,
    window: Window = None,
    end: End = None,
    step: Step = None,
    format: Fmt = Format.table,
    output: Output = None,
    fail_on: FailOn = "none",
    config: ConfigFile = None,
    set_: Sets = None,
    topology: Topology = None,
    strict: Strict = False,
    baseline: Baseline = None,
    previous: Previous = None,
    group_by_label: GroupBy = None,
    webhook: Webhook = None,
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
    """Audit GPU usage and print ranked findings under a fleet summary.

    Exit codes: 0 nothing at or above --fail-on; 1 findings at or above it; 2 a usage error
    or a source that could not be read.
    """
    # Lazy: the pipeline loads pandas and the checks, which would slow `gpuaudit --help`.
    from gpuaudit import config as configuration
    from gpuaudit import pipeline

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
