"""`gpuaudit fix`: the sources and options of `scan`, a folder to write, one call to the
pipeline (`gpuaudit.app.pipeline.fix`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated as A

import typer

from gpuaudit.console.params import from_environment, given, opt, option
from gpuaudit.console.style import failing, fit_terminal, say_notes
from gpuaudit.core import debuglog
from gpuaudit.core.gcpause import FREEZING
from gpuaudit.sources.bounds import (
    DEFAULT_ANSWER_MIB,
    DEFAULT_OBJECTS,
    DEFAULT_PARALLEL,
    DEFAULT_QUERIES,
    DEFAULT_TIMEOUT_S,
)

HELP = (
    "Audit as scan does, and write every recommendation gpuaudit can make a change of into a "
    "folder to review: a patch of the object a team edits (found through the pods' owners) or "
    "a new object (a KEDA ScaledObject for a part-time workload, scheduled in --timezone, "
    "with a prometheus trigger where its pods export a serving queue or request metric; a "
    "PriorityClass a waiting pod may preempt with), a kustomization.yaml listing them (a "
    "kustomize component for an overlay of your manifests), apply.sh (the new objects created "
    "with kubectl apply, then the patches made with kubectl patch), commands.sh (cordon, "
    "drain, a notebook's stop, a node's scale-down-disabled annotation removed, a bare pod's "
    "deletion) and a README that says what each change saves and risks.\n\n"
    "gpuaudit itself changes nothing in the cluster: it only reads. Every patch is applied to "
    "the object as read and validated against the cluster's Kubernetes schema (CRDs against "
    "their published schema) before it is written; a finding that gets no change says why in "
    "the README and in every report (findings[].fix). Exit codes: 0 the folder was written; 2 "
    "a usage error, a source that could not be read, or a folder that could not be written."
)

FIX_HELP = {
    "--output": "The folder to write the changes into: a new folder, or an empty one "
    "(gpuaudit never overwrites a file).",
}


def fix(
    ctx: typer.Context,
    output: A[
        Path,
        opt(
            "--output",
            "-o",
            table=FIX_HELP,
            command="fix",
            metavar="DIR",
            readable=False,
            rich_help_panel="Output",
        ),
    ],
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
    config: A[Path | None, option("config")] = None,
    set: A[list[str] | None, option("set")] = None,
    topology: A[Path | None, option("topology")] = None,
    timezone: A[str, option("timezone")] = "UTC",
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
    """Write the changes that answer the findings (`HELP`).

    The options are `scan`'s (resolved by `gpuaudit.app.config.for_scan`, the one resolver),
    less those about reports, gates and comparisons, plus the folder to write."""
    from gpuaudit.app import config as configuration  # lazy, as in `scan`: they load pandas
    from gpuaudit.app import pipeline
    from gpuaudit.console import progressbar as progress

    if debug:
        debuglog.configure(True)
    with failing():
        options = given(ctx)
        folder = options.pop("output")
        assert isinstance(folder, Path)
        cfg = configuration.for_scan(options, from_environment(ctx) - {"output"})
        if not cfg.quiet:
            say_notes(cfg.notes)
        outcome = pipeline.fix(
            cfg, folder, progress=progress.for_run(cfg.quiet), collector=FREEZING
        )
    if not cfg.quiet:
        sys.stderr.write(fit_terminal(outcome.summary_line(folder)) + "\n")
