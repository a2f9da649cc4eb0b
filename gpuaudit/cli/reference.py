"""Reference commands: `rules`, `checks` and `explain`."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from gpuaudit.cli.options import fail, failing, opt


class RulesFormat(str, enum.Enum):
    prometheusrule = "prometheusrule"
    rules = "rules"


def rules(
    fmt: Annotated[
        RulesFormat,
        opt(
            "--format",
            "prometheusrule (prometheus-operator CRD) or rules (a Prometheus rule file).",
            None,
            "-f",
            envvar="GPUAUDIT_RULES_FORMAT",
        ),
    ] = RulesFormat.prometheusrule,
    pod_label: Annotated[
        str,
        opt(
            "--pod-label",
            "How your DCGM series name the workload: exported (dcgm-exporter Helm default, "
            "exported_pod) or pod.",
        ),
    ] = "exported",
    output: Annotated[Path | None, opt("--output", "Write to this file.", None, "-o")] = None,
) -> None:
    """Print alerting rules (framebuffer pressure, idle reservations, XIDs) and the recording
    rules that make long-window audits cheap; gpuaudit uses the recorded series when it finds
    them on the server."""
    # Lazy: the pipeline loads pandas and the checks, which would slow `gpuaudit --help`.
    from gpuaudit import pipeline

    with failing():
        pipeline.deliver(pipeline.rules_text(fmt.value, pod_label), output)


def checks() -> None:
    """List every check with its stable code."""
    # Lazy: the checks load pandas, which would slow `gpuaudit --help`.
    from gpuaudit.checks import REGISTRY, RETIRED

    t = Table(title="gpuaudit checks")
    t.add_column("Code")
    t.add_column("Title")
    t.add_column("Needs")
    for c in REGISTRY:
        t.add_row(c.code, c.title, ", ".join(c.requires))
    for code, why in sorted(RETIRED.items()):
        t.add_row(code, f"(retired) {why}", "")
    Console().print(t)


def explain(code: Annotated[str, typer.Argument(help="A check code, e.g. GPU001.")]) -> None:
    """Print a check's documentation."""
    # Lazy: the checks load pandas, which would slow `gpuaudit --help`.
    from gpuaudit.checks import BY_CODE, RETIRED

    c = BY_CODE.get(code.strip().upper())
    if c is None:
        if code.strip().upper() in RETIRED:
            print(f"{code.upper()} is retired: {RETIRED[code.strip().upper()]}")
            return
        known = ", ".join(sorted(BY_CODE))
        fail(f"unknown check code {code!r}; known codes: {known}")
    print(c.doc)
