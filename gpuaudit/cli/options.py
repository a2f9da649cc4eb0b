"""What the commands share: the option helper with the help of `scan` and `snapshot save`,
the options the user gave, the error line and the progress bar.

Only Typer and rich are imported at the top, so that `gpuaudit --help` stays fast; the commands
import the configuration and the pipeline when they run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from enum import Enum
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.text import Text

from gpuaudit.errors import GpuauditError

HELP: dict[str, dict[str, str]] = {
    "Data source": {
        "--demo": "Audit the bundled demo cluster (no cluster needed).",
        "--snapshot": "Audit a saved snapshot file.",
        "--prometheus-url": "Collect live DCGM metrics from this Prometheus-compatible URL (path "
        "prefixes such as Mimir's /prometheus are kept).",
    },
    "Kubernetes connection": {
        "--kubeconfig": "Kubeconfig for reading pods, nodes and gang objects (default "
        "$KUBECONFIG, ~/.kube/config, or the in-cluster service account).",
        "--context": "Kubeconfig context to use.",
        "--namespace": "Read pods of this namespace only; repeatable.",
        "--no-kubernetes": "Do not read the Kubernetes API; audit from DCGM pod labels alone.",
    },
    "Window": {
        "--window": "How far back to audit, e.g. 7d, 24h (default 7d; live scans only).",
        "--end": "End of the window: unix seconds or RFC 3339 (default now; live scans only).",
        "--step": "Bucket size of hourly series (default 1h; live scans only).",
    },
    "Output": {
        "--format": "Report format.",
        "--output": "Write the report to this file instead of stdout.",
        "--fail-on": "Exit 1 when a finding is at or above this severity: critical, high, "
        "medium, low, info, or none.",
        "--strict": "Exit 2 when any source answered only in part (the report says what is "
        "missing).",
        "--baseline": "An earlier JSON report: mark findings new, worse or unchanged, list the "
        "resolved ones, and let only new or worse findings drive --fail-on (for CI).",
        "--previous": "Last week's JSON report: show the trend (new, resolved, better, worse) "
        "without changing the exit code (for cron reports).",
        "--group-by-label": "Also break waste down by this pod label, e.g. team.",
        "--webhook": "Post the Markdown summary to this Slack-compatible incoming webhook URL.",
        "--quiet": "No progress bar or summary line on stderr.",
    },
    "Configuration": {
        "--config": "Settings file (default ./gpuaudit.toml when present).",
        "--set": "Override a check threshold, e.g. --set idle_tail_hours=12 (repeatable; "
        "`gpuaudit explain CODE` states each check's settings).",
        "--topology": "Folder of `nvidia-smi topo -m` outputs, one per node (<node>.txt) or per "
        "product (<nvidia.com/gpu.product>.txt), for GPU030.",
    },
    "Prometheus connection": {
        "--prometheus-token": "Bearer token for Prometheus (never printed).",
        "--prometheus-token-file": "File holding the bearer token.",
        "--prometheus-user": "Basic-auth user name.",
        "--prometheus-password": "Basic-auth password (never printed).",
        "--header": "Extra HTTP header 'Name: value', repeatable (X-Scope-OrgID for "
        "Mimir/Cortex, THANOS-TENANT for Thanos). In the environment separate headers with "
        "spaces and write 'Name:value'.",
        "--ca-file": "CA bundle that signs the Prometheus server's certificate.",
        "--client-cert": "Client certificate (PEM) for mutual TLS.",
        "--client-key": "Client key (PEM) for mutual TLS.",
        "--insecure-skip-tls-verify": "Do not verify the server's TLS certificate (not "
        "recommended).",
        "--cluster-label": "NAME=VALUE selecting one cluster's series in a central Prometheus.",
        "--timeout": "Seconds to wait for one answer.",
    },
}
"""The options of `scan` and `snapshot save` by help panel, with their help."""


def opt(flag: str, *short: str, table: Mapping[str, str] | None = None, **kw: Any) -> Any:
    """A `typer.Option` with its help and panel from `HELP`, or its help from `table` and no
    panel. Its environment variable is `GPUAUDIT_` and the flag's name (`--fail-on` reads
    `GPUAUDIT_FAIL_ON`) unless `envvar=` says otherwise."""
    panel = None if table else next(p for p, flags in HELP.items() if flag in flags)
    text = table[flag] if table else HELP[panel or ""][flag]
    kw.setdefault("envvar", "GPUAUDIT_" + flag.removeprefix("--").upper().replace("-", "_"))
    return typer.Option(flag, *short, rich_help_panel=panel, help=text, **kw)


def given(ctx: typer.Context) -> dict[str, object]:
    """The options the user set, by flag or environment variable, by name (a trailing `_` that
    avoids a Python name dropped, enums as their values). Defaults are left out so that
    `gpuaudit.toml` can fill them in."""
    out: dict[str, object] = {}
    for param in ctx.command.params:
        name = param.name
        if param.param_type_name != "option" or name is None:
            continue
        source = ctx.get_parameter_source(name)
        # By name: the enum's module differs between click and the click that Typer vendors.
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            value = ctx.params[name]
            out[name.rstrip("_")] = value.value if isinstance(value, Enum) else value
    return out


def fail(message: str, code: int = 2) -> NoReturn:
    """End the run with one error line on stderr."""
    from gpuaudit.report.safe import terminal  # lazy: gpuaudit.report loads pandas

    Console(stderr=True, soft_wrap=True).print(Text(f"gpuaudit: error: {terminal(message, 600)}"))
    raise typer.Exit(code)


@contextmanager
def failing() -> Iterator[None]:
    """Turn an error a user can cause into one line on stderr and exit code 2."""
    try:
        yield
    except GpuauditError as exc:
        fail(str(exc))


@contextmanager
def progress_bar() -> Iterator[Callable[[int, int], None] | None]:
    """A transient bar on stderr while Prometheus is queried, when stderr is a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    columns = (TextColumn("querying Prometheus"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, transient=True, console=Console(stderr=True)) as prog:
        task = prog.add_task("queries", total=None)

        def tick(done: int, total: int) -> None:
            prog.update(task, completed=done, total=total)

        yield tick
