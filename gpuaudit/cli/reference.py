"""Reference commands: `rules`, `checks` and `explain`."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated as A

import typer

from gpuaudit.console.params import opt
from gpuaudit.console.style import failing


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
    "rules that make long-window audits cheap (5-minute and hourly groups); gpuaudit uses the "
    "recorded series when it finds them on the server, and with --step 1h ends the window on the "
    "hourly group's last evaluation."
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
        Path | None,
        opt(
            "--output",
            "-o",
            table=RULES_HELP,
            command="rules",
            metavar="FILE",
            readable=False,
        ),
    ] = None,
) -> None:
    """Print alerting and recording rules (`RULES_DOC`)."""
    from gpuaudit.app import pipeline  # lazy: it loads pandas, which would slow `gpuaudit --help`

    with failing():
        pipeline.deliver(pipeline.rules_text(fmt.value, pod_label), output)


def checks() -> None:
    """List every check with its stable code."""
    from gpuaudit.console import checkdocs as reference  # lazy: the checks load pandas

    reference.print_checks()


def explain(
    code: A[str, typer.Argument(help="A check code, e.g. GPU001.", metavar="CODE")],
) -> None:
    """Print a check's documentation."""
    from gpuaudit.console import checkdocs as reference  # lazy: the checks load pandas

    with failing():
        print(reference.explain(code))
