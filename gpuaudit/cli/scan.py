"""`gpuaudit scan`: every option of `gpuaudit.app.options`, then one call to the pipeline."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated as A

import typer

from gpuaudit.console.params import from_environment, given, option
from gpuaudit.console.style import failing, say_notes, say_outcome
from gpuaudit.core import debuglog
from gpuaudit.core.gcpause import FREEZING
from gpuaudit.sources.bounds import (
    DEFAULT_ANSWER_MIB,
    DEFAULT_OBJECTS,
    DEFAULT_PARALLEL,
    DEFAULT_QUERIES,
    DEFAULT_TIMEOUT_S,
)


class Format(str, enum.Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"
    junit = "junit"
    showback = "showback"
    focus = "focus"


HELP = (
    "Audit GPU usage and print ranked findings under a fleet summary.\n\n"
    "Exit codes: 0 nothing at or above --fail-on; 1 findings at or above it (with --baseline, "
    "new or worse ones); 2 a usage error, a source that could not be read, an incomplete audit "
    "under --strict, or an audit that audited nothing (no DCGM series, every check skipped) "
    "under --strict or --fail-on, or an output (--output, --report, --webhook) that could not "
    "be written. Every report is written first, and one that fails does not stop the others."
)
"""The command's help, each paragraph one line (Typer keeps a docstring's line breaks)."""


def scan(
    ctx: typer.Context,
    demo: A[bool, option("demo")] = False,
    snapshot: A[Path | None, option("snapshot")] = None,
    prometheus_url: A[str | None, option("prometheus_url")] = None,
    kubeconfig: A[Path | None, option("kubeconfig")] = None,
    context: A[str | None, option("context")] = None,
    namespace: A[list[str] | None, option("namespace")] = None,
    no_kubernetes: A[bool, option("no_kubernetes")] = False,
    window: A[str | None, option("window")] = None,
    end: A[str | None, option("end")] = None,
    step: A[str | None, option("step")] = None,
    max_window: A[str, option("max_window")] = "366d",
    format: A[Format, option("format")] = Format.table,
    output: A[Path | None, option("output")] = None,
    report: A[list[str] | None, option("report")] = None,
    fail_on: A[str, option("fail_on")] = "none",
    config: A[Path | None, option("config")] = None,
    set: A[list[str] | None, option("set")] = None,
    topology: A[Path | None, option("topology")] = None,
    timezone: A[str, option("timezone")] = "UTC",
    strict: A[bool, option("strict")] = False,
    baseline: A[Path | None, option("baseline")] = None,
    previous: A[Path | None, option("previous")] = None,
    history: A[Path | None, option("history")] = None,
    history_keep: A[int, option("history_keep")] = 26,
    group_by_label: A[str | None, option("group_by_label")] = None,
    owner_keys: A[list[str] | None, option("owner_keys")] = None,
    per_owner: A[Path | None, option("per_owner")] = None,
    what_if: A[str | None, option("what_if")] = None,
    idle_rule: A[str, option("idle_rule")] = "none",
    all: A[bool, option("all")] = False,
    webhook: A[str | None, option("webhook")] = None,
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
    """Audit GPU usage (`HELP`).

    The parameters declare the options, in the order `--help` lists them; their values are
    read back from `ctx` (`given`), which says where each came from, since
    `gpuaudit.app.config` puts `gpuaudit.toml` between the environment and the defaults."""
    from gpuaudit.app import config as configuration  # lazy, as the pipeline:
    from gpuaudit.app import pipeline  # they load pandas, which would slow `gpuaudit --help`
    from gpuaudit.console import progressbar as progress

    if debug:
        debuglog.configure(True)
    with failing():
        cfg = configuration.for_scan(given(ctx), from_environment(ctx))
        if not cfg.quiet:
            say_notes(cfg.notes)
        outcome = pipeline.run(cfg, progress=progress.for_run(cfg.quiet), collector=FREEZING)
    say_outcome(outcome, quiet=cfg.quiet, timings=cfg.timings)
    if outcome.code:
        raise typer.Exit(outcome.code)
