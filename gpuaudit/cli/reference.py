"""Reference commands: `rules`, `checks` and `explain`."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated as A

import typer
from rich.console import Console
from rich.table import Table

from gpuaudit.cli.options import fail, failing, opt


class RulesFormat(str, enum.Enum):
    prometheusrule = "prometheusrule"
    rules = "rules"


RULES_HELP = {
    "--format": "prometheusrule (prometheus-operator CRD) or rules (a Prometheus rule file).",
    "--pod-label": "How your DCGM series name the workload: exported (dcgm-exporter Helm "
    "default, exported_pod) or pod.",
    "--output": "Write to this file.",
}


RULES_DOC = (
    "Print alerting rules (framebuffer pressure, idle reservations, XIDs) and the recording "
    "rules that make long-window audits cheap; gpuaudit uses the recorded series when it finds "
    "them on the server."
)
"""The help of `rules`, one line (Typer keeps a docstring's line breaks in the command list)."""


def rules(
    fmt: A[
        RulesFormat,
        opt("--format", "-f", table=RULES_HELP, command="rules", metavar="prometheusrule|rules"),
    ] = RulesFormat.prometheusrule,
    pod_label: A[
        str, opt("--pod-label", table=RULES_HELP, command="rules", metavar="exported|pod")
    ] = "exported",
    output: A[
        Path | None, opt("--output", "-o", table=RULES_HELP, command="rules", metavar="FILE")
    ] = None,
) -> None:
    """Print alerting and recording rules (`RULES_DOC`)."""
    from gpuaudit import pipeline  # lazy: it loads pandas, which would slow `gpuaudit --help`

    with failing():
        pipeline.deliver(pipeline.rules_text(fmt.value, pod_label), output)


def checks() -> None:
    """List every check with its stable code."""
    from gpuaudit.checks import RETIRED, discover  # lazy: the checks load pandas

    t = Table(title="gpuaudit checks")
    t.add_column("Code")
    t.add_column("Title")
    t.add_column("Needs")
    for c in discover():
        t.add_row(c.code, c.title, ", ".join(r.value for r in c.requires))
    for code, why in sorted(RETIRED.items()):
        t.add_row(code, f"(retired) {why}", "")
    Console().print(t)


def explain(
    code: A[str, typer.Argument(help="A check code, e.g. GPU001.", metavar="CODE")],
) -> None:
    """Print a check's documentation."""
    from gpuaudit.checks import RETIRED, by_code, discover  # lazy: the checks load pandas

    c = by_code(code)
    if c is None:
        if code.strip().upper() in RETIRED:
            print(f"{code.upper()} is retired: {RETIRED[code.strip().upper()]}")
            return
        known = ", ".join(k.code for k in discover())
        fail(f"unknown check code {code!r}; known codes: {known}")
    from gpuaudit.coherence import EXPLAIN

    print(f"{c.explain()}\n\n{EXPLAIN}")
