"""Option declarations shared by `scan` and `snapshot save`, and the helpers every command uses.

Only the standard library, Typer and rich are imported here, so that `gpuaudit --help` stays
fast; the commands import the configuration and the pipeline when they run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.text import Text

from gpuaudit.errors import GpuauditError

SOURCE, WINDOW, OUTPUT = "Data source", "Window", "Output"
CONFIG, PROM, KUBE = "Configuration", "Prometheus connection", "Kubernetes connection"


def opt(flag: str, text: str, panel: str | None = None, *more: str, **kw: Any) -> Any:
    """A `typer.Option` in help panel `panel`; its environment variable is `GPUAUDIT_` and the
    flag's name (`--fail-on` reads `GPUAUDIT_FAIL_ON`) unless `envvar=` says otherwise."""
    kw.setdefault("envvar", "GPUAUDIT_" + flag.removeprefix("--").upper().replace("-", "_"))
    return typer.Option(flag, *more, rich_help_panel=panel, help=text, **kw)


PromUrl = Annotated[
    str | None,
    opt(
        "--prometheus-url",
        "Collect live DCGM metrics from this Prometheus-compatible URL (path prefixes such as "
        "Mimir's /prometheus are kept).",
        SOURCE,
    ),
]
PromToken = Annotated[
    str | None,
    opt(
        "--prometheus-token",
        "Bearer token for Prometheus (never printed).",
        PROM,
        show_default=False,
    ),
]
PromTokenFile = Annotated[
    Path | None, opt("--prometheus-token-file", "File holding the bearer token.", PROM)
]
PromUser = Annotated[str | None, opt("--prometheus-user", "Basic-auth user name.", PROM)]
PromPassword = Annotated[
    str | None,
    opt("--prometheus-password", "Basic-auth password (never printed).", PROM, show_default=False),
]
Headers = Annotated[
    list[str] | None,
    opt(
        "--header",
        "Extra HTTP header 'Name: value', repeatable (X-Scope-OrgID for Mimir/Cortex, "
        "THANOS-TENANT for Thanos). In the environment separate headers with spaces and write "
        "'Name:value'.",
        PROM,
        "-H",
    ),
]
CaFile = Annotated[
    Path | None, opt("--ca-file", "CA bundle that signs the Prometheus server's certificate.", PROM)
]
ClientCert = Annotated[
    Path | None, opt("--client-cert", "Client certificate (PEM) for mutual TLS.", PROM)
]
ClientKey = Annotated[Path | None, opt("--client-key", "Client key (PEM) for mutual TLS.", PROM)]
Insecure = Annotated[
    bool,
    opt(
        "--insecure-skip-tls-verify",
        "Do not verify the server's TLS certificate (not recommended).",
        PROM,
    ),
]
ClusterLabel = Annotated[
    str | None,
    opt(
        "--cluster-label",
        "NAME=VALUE selecting one cluster's series in a central Prometheus.",
        PROM,
    ),
]
Timeout = Annotated[float, opt("--timeout", "Seconds to wait for one answer.", PROM)]
Kubeconfig = Annotated[
    Path | None,
    opt(
        "--kubeconfig",
        "Kubeconfig for reading pods, nodes and gang objects (default $KUBECONFIG, "
        "~/.kube/config, or the in-cluster service account).",
        KUBE,
    ),
]
Context = Annotated[str | None, opt("--context", "Kubeconfig context to use.", KUBE)]
Namespaces = Annotated[
    list[str] | None,
    opt("--namespace", "Read pods of this namespace only; repeatable.", KUBE, "-n"),
]
NoKube = Annotated[
    bool,
    opt(
        "--no-kubernetes", "Do not read the Kubernetes API; audit from DCGM pod labels alone.", KUBE
    ),
]
Window = Annotated[
    str | None,
    opt("--window", "How far back to audit, e.g. 7d, 24h (default 7d; live scans only).", WINDOW),
]
End = Annotated[
    str | None,
    opt(
        "--end",
        "End of the window: unix seconds or RFC 3339 (default now; live scans only).",
        WINDOW,
    ),
]
Step = Annotated[
    str | None,
    opt("--step", "Bucket size of hourly series (default 1h; live scans only).", WINDOW),
]
Quiet = Annotated[bool, opt("--quiet", "No progress bar or summary line on stderr.", OUTPUT, "-q")]
ConfigFile = Annotated[
    Path | None,
    opt("--config", "Settings file (default ./gpuaudit.toml when present).", CONFIG),
]


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
    # Lazy: gpuaudit.report loads pandas, which would slow `gpuaudit --help`.
    from gpuaudit.report.safe import terminal

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
