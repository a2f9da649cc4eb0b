"""The command line. It only wires sources, snapshot, inventory, checks and reports together."""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from gpuaudit import __version__
from gpuaudit.errors import ConfigError, GpuauditError

if TYPE_CHECKING:
    from rich.console import Console

    from gpuaudit.audit import AuditResult
    from gpuaudit.settings import Settings
    from gpuaudit.snapshot import Snapshot

app = typer.Typer(
    name="gpuaudit",
    help="Audit GPU usage on Kubernetes: find idle and misplaced GPUs, rank them by cost, "
    "and say what to change.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    add_completion=False,
)

SOURCE = "Data source"
WINDOW = "Window"
OUTPUT = "Output"
CONFIG = "Configuration"
PROM = "Prometheus connection"
KUBE = "Kubernetes connection"

PromUrl = Annotated[
    str | None,
    typer.Option(
        "--prometheus-url",
        envvar="GPUAUDIT_PROMETHEUS_URL",
        rich_help_panel=SOURCE,
        help="Collect live DCGM metrics from this Prometheus-compatible URL (path prefixes such as "
        "Mimir's /prometheus are kept).",
    ),
]
PromToken = Annotated[
    str | None,
    typer.Option(
        "--prometheus-token",
        envvar="GPUAUDIT_PROMETHEUS_TOKEN",
        rich_help_panel=PROM,
        help="Bearer token for Prometheus (never printed).",
        show_default=False,
    ),
]
PromTokenFile = Annotated[
    Path | None,
    typer.Option(
        "--prometheus-token-file",
        envvar="GPUAUDIT_PROMETHEUS_TOKEN_FILE",
        rich_help_panel=PROM,
        help="File holding the bearer token.",
    ),
]
PromUser = Annotated[
    str | None,
    typer.Option(
        "--prometheus-user",
        envvar="GPUAUDIT_PROMETHEUS_USER",
        rich_help_panel=PROM,
        help="Basic-auth user name.",
    ),
]
PromPassword = Annotated[
    str | None,
    typer.Option(
        "--prometheus-password",
        envvar="GPUAUDIT_PROMETHEUS_PASSWORD",
        rich_help_panel=PROM,
        help="Basic-auth password (never printed).",
        show_default=False,
    ),
]
Headers = Annotated[
    list[str] | None,
    typer.Option(
        "--header",
        "-H",
        envvar="GPUAUDIT_HEADER",
        rich_help_panel=PROM,
        help="Extra HTTP header 'Name: value', repeatable (X-Scope-OrgID for Mimir/Cortex, "
        "THANOS-TENANT for Thanos). In the environment separate headers with spaces and write "
        "'Name:value'.",
    ),
]
CaFile = Annotated[
    Path | None,
    typer.Option(
        "--ca-file",
        envvar="GPUAUDIT_CA_FILE",
        rich_help_panel=PROM,
        help="CA bundle that signs the Prometheus server's certificate.",
    ),
]
ClientCert = Annotated[
    Path | None,
    typer.Option(
        "--client-cert",
        envvar="GPUAUDIT_CLIENT_CERT",
        rich_help_panel=PROM,
        help="Client certificate (PEM) for mutual TLS.",
    ),
]
ClientKey = Annotated[
    Path | None,
    typer.Option(
        "--client-key",
        envvar="GPUAUDIT_CLIENT_KEY",
        rich_help_panel=PROM,
        help="Client key (PEM) for mutual TLS.",
    ),
]
Insecure = Annotated[
    bool,
    typer.Option(
        "--insecure-skip-tls-verify",
        envvar="GPUAUDIT_INSECURE_SKIP_TLS_VERIFY",
        rich_help_panel=PROM,
        help="Do not verify the server's TLS certificate (not recommended).",
    ),
]
ClusterLabel = Annotated[
    str | None,
    typer.Option(
        "--cluster-label",
        envvar="GPUAUDIT_CLUSTER_LABEL",
        rich_help_panel=PROM,
        help="NAME=VALUE selecting one cluster's series in a central Prometheus.",
    ),
]
Timeout = Annotated[
    float,
    typer.Option(
        "--timeout",
        envvar="GPUAUDIT_TIMEOUT",
        rich_help_panel=PROM,
        help="Seconds to wait for one answer.",
    ),
]
Kubeconfig = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        envvar="GPUAUDIT_KUBECONFIG",
        rich_help_panel=KUBE,
        help="Kubeconfig for reading pods, nodes and gang objects (default $KUBECONFIG, "
        "~/.kube/config, or the in-cluster service account).",
    ),
]
Context = Annotated[
    str | None,
    typer.Option(
        "--context",
        envvar="GPUAUDIT_CONTEXT",
        rich_help_panel=KUBE,
        help="Kubeconfig context to use.",
    ),
]
Namespaces = Annotated[
    list[str] | None,
    typer.Option(
        "--namespace",
        "-n",
        envvar="GPUAUDIT_NAMESPACE",
        rich_help_panel=KUBE,
        help="Read pods of this namespace only; repeatable.",
    ),
]
NoKube = Annotated[
    bool,
    typer.Option(
        "--no-kubernetes",
        envvar="GPUAUDIT_NO_KUBERNETES",
        rich_help_panel=KUBE,
        help="Do not read the Kubernetes API; audit from DCGM pod labels alone.",
    ),
]
Window_ = Annotated[
    str | None,
    typer.Option(
        "--window",
        envvar="GPUAUDIT_WINDOW",
        rich_help_panel=WINDOW,
        help="How far back to audit, e.g. 7d, 24h (default 7d; live scans only).",
    ),
]
End_ = Annotated[
    str | None,
    typer.Option(
        "--end",
        envvar="GPUAUDIT_END",
        rich_help_panel=WINDOW,
        help="End of the window: unix seconds or RFC 3339 (default now; live scans only).",
    ),
]
Step_ = Annotated[
    str | None,
    typer.Option(
        "--step",
        envvar="GPUAUDIT_STEP",
        rich_help_panel=WINDOW,
        help="Bucket size of hourly series (default 1h; live scans only).",
    ),
]
Quiet = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        envvar="GPUAUDIT_QUIET",
        rich_help_panel=OUTPUT,
        help="No progress bar or summary line on stderr.",
    ),
]
Sets = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        envvar="GPUAUDIT_SET",
        rich_help_panel=CONFIG,
        help="Override a check threshold, e.g. --set idle_tail_hours=12 (repeatable; "
        "`gpuaudit explain CODE` states each check's settings).",
    ),
]
Strict = Annotated[
    bool,
    typer.Option(
        "--strict",
        envvar="GPUAUDIT_STRICT",
        rich_help_panel=OUTPUT,
        help="Exit 2 when any source answered only in part (the report says what is missing).",
    ),
]
Config_ = Annotated[
    Path | None,
    typer.Option(
        "--config",
        envvar="GPUAUDIT_CONFIG",
        rich_help_panel=CONFIG,
        help="Settings file (default ./gpuaudit.toml when present).",
    ),
]


class Format(str, enum.Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"
    junit = "junit"


def _fail(message: str, code: int = 2) -> NoReturn:
    from rich.console import Console
    from rich.text import Text

    from gpuaudit.report.safe import terminal

    Console(stderr=True, soft_wrap=True).print(Text(f"gpuaudit: error: {terminal(message, 600)}"))
    raise typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        print(f"gpuaudit {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            envvar="GPUAUDIT_DEBUG_LOG",
            help="Log every request to stderr (credentials redacted).",
        ),
    ] = False,
) -> None:
    """gpuaudit joins DCGM metrics with Kubernetes objects, finds GPU waste, ranks it by cost."""
    import logging

    logger = logging.getLogger("gpuaudit")
    if debug:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("gpuaudit: debug: %(name)s: %(message)s"))
        logger.handlers[:] = [handler]
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
    else:  # a run in the same process after a --debug one (tests, embedding) logs nothing
        logger.handlers[:] = []
        logger.setLevel(logging.NOTSET)
        logger.propagate = True


class _StderrHandler(logging.Handler):
    """Writes to whatever `sys.stderr` is when a record is emitted (not when it was made)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - logging must never break a run
            self.handleError(record)


def parse_end(text: str | None) -> float | None:
    """`--end`: unix seconds or an RFC 3339 time; None means now."""
    if text is None or text == "":
        return None
    t = text.strip()
    try:
        return float(t)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"invalid --end {text!r}; use unix seconds or RFC 3339") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def demo_path() -> Path:
    """The bundled demo snapshot."""
    try:
        from importlib.resources import files

        res = files("gpuaudit.fixtures").joinpath("demo.snapshot.json.gz")
        if res.is_file():
            return Path(str(res))
    except (ModuleNotFoundError, TypeError):
        pass
    here = Path(__file__).resolve().parent.parent / "fixtures" / "demo.snapshot.json.gz"
    if here.is_file():
        return here
    raise GpuauditError("the bundled demo snapshot is missing from this installation")


class _Stages:
    """Wall time per stage, printed to stderr as one JSON line when GPUAUDIT_TIMINGS is set
    (the benchmarks read it)."""

    def __init__(self) -> None:
        import time

        self._now = time.perf_counter
        self._last = self._now()
        self.stages: dict[str, float] = {}

    def mark(self, name: str) -> None:
        now = self._now()
        self.stages[name] = round(now - self._last, 4)
        self._last = now

    def report(self) -> None:
        if os.environ.get("GPUAUDIT_TIMINGS"):
            import json

            sys.stderr.write("gpuaudit-timings: " + json.dumps(self.stages) + "\n")


@dataclass(frozen=True)
class ReportOptions:
    """What the report compares against and how it groups."""

    baseline: Path | None = None
    previous: Path | None = None
    group_by_label: str = ""
    webhook: str | None = None


@dataclass(frozen=True)
class LiveOptions:
    """Everything a live collection needs, from flags and the environment."""

    prometheus_url: str
    token: str | None = None
    token_file: Path | None = None
    user: str | None = None
    password: str | None = None
    headers: tuple[str, ...] = ()
    ca_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    insecure: bool = False
    cluster_label: str | None = None
    timeout: float = 120.0
    kubeconfig: Path | None = None
    context: str | None = None
    namespaces: tuple[str, ...] = ()
    no_kubernetes: bool = False
    quiet: bool = False

    @classmethod
    def from_flags(cls, flags: dict[str, Any]) -> LiveOptions:
        """Build from the parameters of `scan` or `snapshot save` (their `locals()`)."""
        return cls(
            prometheus_url=flags["prometheus_url"] or "",
            token=flags["prometheus_token"],
            token_file=flags["prometheus_token_file"],
            user=flags["prometheus_user"],
            password=flags["prometheus_password"],
            headers=tuple(flags["header"] or ()),
            ca_file=flags["ca_file"],
            client_cert=flags["client_cert"],
            client_key=flags["client_key"],
            insecure=flags["insecure_skip_tls_verify"],
            cluster_label=flags["cluster_label"],
            timeout=flags["timeout"],
            kubeconfig=flags["kubeconfig"],
            context=flags["context"],
            namespaces=tuple(flags["namespace"] or ()),
            no_kubernetes=flags["no_kubernetes"],
            quiet=flags["quiet"],
        )


@app.command(rich_help_panel="Audit")
def scan(
    demo: Annotated[
        bool,
        typer.Option(
            "--demo",
            envvar="GPUAUDIT_DEMO",
            rich_help_panel=SOURCE,
            help="Audit the bundled demo cluster (no cluster needed).",
        ),
    ] = False,
    snapshot: Annotated[
        Path | None,
        typer.Option(
            "--snapshot",
            envvar="GPUAUDIT_SNAPSHOT",
            rich_help_panel=SOURCE,
            help="Audit a saved snapshot file.",
        ),
    ] = None,
    prometheus_url: PromUrl = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespaces = None,
    no_kubernetes: NoKube = False,
    window: Window_ = None,
    end: End_ = None,
    step: Step_ = None,
    fmt: Annotated[
        Format,
        typer.Option(
            "--format",
            "-f",
            envvar="GPUAUDIT_FORMAT",
            rich_help_panel=OUTPUT,
            help="Report format.",
        ),
    ] = Format.table,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            envvar="GPUAUDIT_OUTPUT",
            rich_help_panel=OUTPUT,
            help="Write the report to this file instead of stdout.",
        ),
    ] = None,
    fail_on: Annotated[
        str,
        typer.Option(
            "--fail-on",
            envvar="GPUAUDIT_FAIL_ON",
            rich_help_panel=OUTPUT,
            help="Exit 1 when a finding is at or above this severity: critical, high, medium, "
            "low, info, or none.",
        ),
    ] = "none",
    config: Config_ = None,
    set_: Sets = None,
    topology: Annotated[
        Path | None,
        typer.Option(
            "--topology",
            envvar="GPUAUDIT_TOPOLOGY",
            rich_help_panel=CONFIG,
            help="Folder of `nvidia-smi topo -m` outputs, one per node (<node>.txt) or per "
            "product (<nvidia.com/gpu.product>.txt), for GPU030.",
        ),
    ] = None,
    strict: Strict = False,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            envvar="GPUAUDIT_BASELINE",
            rich_help_panel=OUTPUT,
            help="An earlier JSON report: mark findings new, worse or unchanged, list the "
            "resolved ones, and let only new or worse findings drive --fail-on (for CI).",
        ),
    ] = None,
    previous: Annotated[
        Path | None,
        typer.Option(
            "--previous",
            envvar="GPUAUDIT_PREVIOUS",
            rich_help_panel=OUTPUT,
            help="Last week's JSON report: show the trend (new, resolved, better, worse) "
            "without changing the exit code (for cron reports).",
        ),
    ] = None,
    group_by_label: Annotated[
        str | None,
        typer.Option(
            "--group-by-label",
            envvar="GPUAUDIT_GROUP_BY_LABEL",
            rich_help_panel=OUTPUT,
            help="Also break waste down by this pod label, e.g. team.",
        ),
    ] = None,
    webhook: Annotated[
        str | None,
        typer.Option(
            "--webhook",
            envvar="GPUAUDIT_WEBHOOK",
            rich_help_panel=OUTPUT,
            help="Post the Markdown summary to this Slack-compatible incoming webhook URL.",
            show_default=False,
        ),
    ] = None,
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
    try:
        live = LiveOptions.from_flags(locals())
        _scan(
            demo,
            snapshot,
            live,
            window,
            end,
            step,
            fmt,
            output,
            fail_on,
            config,
            quiet,
            tuple(set_ or ()),
            strict,
            ReportOptions(baseline, previous, group_by_label or "", webhook),
            topology,
        )
    except GpuauditError as exc:
        _fail(str(exc))


def _scan(
    demo: bool,
    snapshot_path: Path | None,
    live: LiveOptions,
    window: str | None,
    end: str | None,
    step: str | None,
    fmt: Format,
    output: Path | None,
    fail_on: str,
    config: Path | None,
    quiet: bool,
    sets: tuple[str, ...] = (),
    strict: bool = False,
    report: ReportOptions | None = None,
    topology: Path | None = None,
) -> None:
    from gpuaudit import snapshot as snap_mod
    from gpuaudit import waivers as waiver_mod
    from gpuaudit.audit import run_checks
    from gpuaudit.compare import load_report
    from gpuaudit.findings import Severity
    from gpuaudit.inventory import build
    from gpuaudit.settings import load_config

    threshold: Severity | None = None
    if fail_on.strip().lower() != "none":
        try:
            threshold = Severity.parse(fail_on)
        except ValueError as exc:
            raise ConfigError(f"--fail-on: {exc}") from None
    sources = [bool(demo), snapshot_path is not None, bool(live.prometheus_url)]
    if sum(sources) == 0:
        raise ConfigError("say what to audit: --demo, --snapshot FILE or --prometheus-url URL")
    if sum(sources) > 1:
        raise ConfigError("use only one of --demo, --snapshot and --prometheus-url")
    settings = _settings(config, window, step, end, sets, topology)
    clock = _Stages()
    if live.prometheus_url:
        snap = collect_live(live, settings.window_s, settings.step_s, settings.end, as_arrays=True)
    else:
        path = demo_path() if demo else snapshot_path
        assert path is not None
        snap = snap_mod.read(path)
    clock.mark("load")
    inv = build(snap, settings.topology_dir)
    del snap  # the raw answers are no longer needed; free them before the checks run
    clock.mark("inventory")
    report = report or ReportOptions()
    if report.baseline and report.previous:
        raise ConfigError("use --baseline (CI) or --previous (trend), not both")
    against = report.baseline or report.previous
    previous = (against.name, load_report(against)) if against else None
    waivers = tuple(waiver_mod.parse(load_config(config)))
    result = run_checks(
        inv, settings, waivers=waivers, group_label=report.group_by_label, previous=previous
    )
    clock.mark("checks")
    _emit(result, fmt, output)
    clock.mark("render")
    clock.report()
    if report.webhook:
        from gpuaudit.report.markdown import summary as markdown_summary
        from gpuaudit.report.webhook import post as post_webhook

        post_webhook(report.webhook, markdown_summary(result))
    if not quiet:
        s = result.summary
        note = "" if result.complete else " (INCOMPLETE: some sources answered in part)"
        sys.stderr.write(
            f"gpuaudit: {len(result.findings)} findings, {s.idle_gpu_hours:,.0f} idle GPU-hours, "
            f"{s.wasted_cost:,.0f} {s.currency} wasted over {s.window_hours:.0f} h{note}\n"
        )
    if strict and not result.complete:
        sys.stderr.write(
            "gpuaudit: --strict: the audit is incomplete: "
            + "; ".join(result.incomplete_reasons)[:500]
            + "\n"
        )
        raise typer.Exit(2)
    gating = result.findings
    if report.baseline:
        gating = tuple(f for f in result.findings if result.status_of(f) in ("new", "worse"))
    if threshold is not None and any(f.severity.rank >= threshold.rank for f in gating):
        raise typer.Exit(1)


def _settings(
    config: Path | None,
    window: str | None,
    step: str | None,
    end: str | None,
    sets: tuple[str, ...] = (),
    topology: Path | None = None,
) -> Settings:
    from gpuaudit.settings import known_check_settings, load_config, parse_duration, settings_from

    known = known_check_settings()
    checks: dict[str, float] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        key = key.strip().removeprefix("checks.")
        if not sep or key not in known:
            raise ConfigError(
                f"--set {item!r}: use NAME=NUMBER with one of: " + ", ".join(sorted(known))
            )
        try:
            checks[key] = float(value)
        except ValueError:
            raise ConfigError(f"--set {item!r}: {value!r} is not a number") from None
    return settings_from(
        load_config(config),
        window_s=parse_duration(window) if window else None,
        step_s=parse_duration(step) if step else None,
        end=parse_end(end),
        topology_dir=_topology_dir(topology),
        **checks,
    )


def _topology_dir(path: Path | None) -> Path | None:
    if path is not None and not path.is_dir():
        raise ConfigError(f"--topology {path} is not a folder of `nvidia-smi topo -m` files")
    return path


def _parse_headers(raw: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for h in raw:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"--header {h.split(':')[0]!r}...: use 'Name: value'")
        out[name.strip()] = value.strip()
    return out


def _use_kubernetes(live: LiveOptions) -> bool:
    if live.no_kubernetes:
        return False
    if live.kubeconfig or live.context or os.environ.get("KUBERNETES_SERVICE_HOST"):
        return True
    if os.environ.get("KUBECONFIG"):
        return True
    return (Path.home() / ".kube" / "config").is_file()


def collect_live(
    live: LiveOptions, window_s: int, step_s: int, end: float | None, as_arrays: bool = False
) -> Snapshot:
    """Collect a snapshot from Prometheus (and the Kubernetes API when reachable); `as_arrays`
    for a scan: answers parsed as they arrive, no raw text kept."""
    from gpuaudit.collect import build_snapshot, collect_prometheus, make_window
    from gpuaudit.sources.prometheus import PromClient, PromConfig

    cluster_label: tuple[str, str] | None = None
    if live.cluster_label:
        name, sep, value = live.cluster_label.partition("=")
        if not sep or not name.strip():
            raise ConfigError("--cluster-label must be NAME=VALUE")
        cluster_label = (name.strip(), value.strip())
    cfg = PromConfig(
        url=live.prometheus_url,
        token=live.token,
        token_file=live.token_file,
        username=live.user,
        password=live.password,
        headers=_parse_headers(live.headers),
        ca_file=live.ca_file,
        client_cert=live.client_cert,
        client_key=live.client_key,
        insecure_skip_tls_verify=live.insecure,
        timeout_s=live.timeout,
    )
    url = httpx_url_for_display(live.prometheus_url)
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"--prometheus-url must start with http:// or https://, got {url!r}")
    w = make_window(window_s, step_s, end)
    with _progress(live.quiet) as tick, PromClient(cfg) as client:
        answers, fields = collect_prometheus(
            client, w, cluster_label, progress=tick, as_arrays=as_arrays
        )
    kube: dict[str, list[dict[str, Any]]] = {}
    objects: dict[str, str] = {}
    warnings: list[str] = []
    cluster = cluster_label[1] if cluster_label else ""
    if _use_kubernetes(live):
        from gpuaudit.sources.kubernetes import collect as kube_collect

        explicit = bool(live.kubeconfig or live.context)
        try:
            kc = kube_collect(live.kubeconfig, live.context, live.namespaces)
            kube, objects, warnings = kc.kubernetes, kc.objects, list(kc.warnings)
            cluster = cluster or kc.cluster
        except ConfigError:
            raise
        except GpuauditError as exc:
            if explicit:
                raise
            warnings.append(f"the Kubernetes API was not read: {exc}")
            objects = {"pods": f"not read: {exc}", "nodes": f"not read: {exc}"}
    else:
        why = (
            "not read: --no-kubernetes"
            if live.no_kubernetes
            else "not read: no kubeconfig or in-cluster service account (use --kubeconfig)"
        )
        objects = {"pods": why, "nodes": why}
    for key, state in sorted(objects.items()):
        if state.startswith(("forbidden", "failed", "incomplete")):
            fields.setdefault("incomplete_reasons", []).append(f"Kubernetes {key}: {state}")
    return build_snapshot(answers, fields, w, cluster or url, url, kube, objects, warnings)


def httpx_url_for_display(url: str) -> str:
    """A URL without credentials or query string, safe to print and record."""
    import httpx

    try:
        u = httpx.URL(url.strip())
    except Exception:  # noqa: BLE001 - any unparsable URL is a usage error below
        return url.split("?")[0].split("@")[-1]
    return str(u.copy_with(username=None, password=None, query=None, fragment=None))


@contextlib.contextmanager
def _progress(quiet: bool) -> Iterator[Callable[[int, int], None] | None]:
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("querying Prometheus"),
        BarColumn(),
        MofNCompleteColumn(),
        transient=True,
        console=_stderr_console(),
    ) as prog:
        task = prog.add_task("queries", total=None)

        def tick(done: int, total: int) -> None:
            prog.update(task, completed=done, total=total)

        yield tick


def _stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


snapshot_app = typer.Typer(help="Save and inspect snapshots.", no_args_is_help=True)
app.add_typer(snapshot_app, name="snapshot", rich_help_panel="Audit")


@snapshot_app.command("save")
def snapshot_save(
    file: Annotated[Path, typer.Argument(help="Where to write (.json or .json.gz).")],
    prometheus_url: PromUrl = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespaces = None,
    no_kubernetes: NoKube = False,
    window: Window_ = None,
    end: End_ = None,
    step: Step_ = None,
    config: Config_ = None,
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
    from gpuaudit import snapshot as snap_mod

    try:
        if not prometheus_url:
            raise ConfigError("snapshot save needs --prometheus-url URL")
        live = LiveOptions.from_flags(locals())
        settings = _settings(config, window, step, end)
        snap = collect_live(live, settings.window_s, settings.step_s, settings.end)
        try:
            snap_mod.write(snap, file)
        except OSError as exc:
            raise GpuauditError(f"cannot write {file}: {exc.strerror or exc}") from None
        if not quiet:
            n = sum(len(v) for v in snap.prometheus.values())
            sys.stderr.write(f"gpuaudit: wrote {file} ({n} Prometheus answers)\n")
    except GpuauditError as exc:
        _fail(str(exc))


def _emit(result: object, fmt: Format, output: Path | None) -> None:
    from rich.console import Console

    from gpuaudit.audit import AuditResult
    from gpuaudit.report import table

    assert isinstance(result, AuditResult)
    if fmt is not Format.table:
        text = _render_text(result, fmt)
        if output:
            _write(output, text)
        else:
            sys.stdout.write(text)
        return
    if output:
        import io

        buf = io.StringIO()
        table.print_report(
            result, Console(file=buf, width=160, no_color=True, force_terminal=False)
        )
        _write(output, buf.getvalue())
    else:
        table.print_report(result, Console(highlight=False))


def _render_text(result: AuditResult, fmt: Format) -> str:
    if fmt is Format.json:
        from gpuaudit.report import json_report

        return json_report.render(result)
    if fmt is Format.markdown:
        from gpuaudit.report import markdown

        return markdown.render(result)
    if fmt is Format.html:
        from gpuaudit.report import html

        return html.render(result)
    from gpuaudit.report import junit

    return junit.render(result)


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise GpuauditError(f"cannot write {path}: {exc.strerror or exc}") from None


class RulesFormat(str, enum.Enum):
    prometheusrule = "prometheusrule"
    rules = "rules"


@app.command(rich_help_panel="Alerts")
def rules(
    fmt: Annotated[
        RulesFormat,
        typer.Option(
            "--format",
            "-f",
            envvar="GPUAUDIT_RULES_FORMAT",
            help="prometheusrule (prometheus-operator CRD) or rules (a Prometheus rule file).",
        ),
    ] = RulesFormat.prometheusrule,
    pod_label: Annotated[
        str,
        typer.Option(
            "--pod-label",
            envvar="GPUAUDIT_POD_LABEL",
            help="How your DCGM series name the workload: exported (dcgm-exporter Helm "
            "default, exported_pod) or pod.",
        ),
    ] = "exported",
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", envvar="GPUAUDIT_OUTPUT", help="Write to this file."),
    ] = None,
) -> None:
    """Print alerting rules (framebuffer pressure, idle reservations, XIDs) and the recording
    rules that make long-window audits cheap; gpuaudit uses the recorded series when it finds
    them on the server."""
    from gpuaudit.rules import render

    try:
        if pod_label not in ("exported", "pod"):
            raise ConfigError("--pod-label must be exported or pod")
        text = render(fmt.value, pod_label)
        if output:
            _write(output, text)
        else:
            sys.stdout.write(text)
    except GpuauditError as exc:
        _fail(str(exc))


@app.command(rich_help_panel="Reference")
def checks() -> None:
    """List every check with its stable code."""
    from rich.console import Console
    from rich.table import Table

    from gpuaudit.checks import RETIRED, discover

    t = Table(title="gpuaudit checks")
    t.add_column("Code")
    t.add_column("Title")
    t.add_column("Needs")
    for c in discover():
        t.add_row(c.code, c.title, ", ".join(r.value for r in c.requires))
    for code, why in sorted(RETIRED.items()):
        t.add_row(code, f"(retired) {why}", "")
    Console().print(t)


@app.command(rich_help_panel="Reference")
def explain(code: Annotated[str, typer.Argument(help="A check code, e.g. GPU001.")]) -> None:
    """Print a check's documentation."""
    from gpuaudit.checks import RETIRED, by_code, discover

    c = by_code(code)
    if c is None:
        if code.strip().upper() in RETIRED:
            print(f"{code.upper()} is retired: {RETIRED[code.strip().upper()]}")
            return
        known = ", ".join(k.code for k in discover())
        _fail(f"unknown check code {code!r}; known codes: {known}")
    print(c.explain())


@app.command(rich_help_panel="Testing")
def scenario(
    gpus: Annotated[
        int, typer.Option("--gpus", envvar="GPUAUDIT_GPUS", help="About how many GPUs.")
    ] = 400,
    days: Annotated[
        int, typer.Option("--days", envvar="GPUAUDIT_DAYS", help="Window length in days.")
    ] = 7,
    seed: Annotated[int, typer.Option("--seed", envvar="GPUAUDIT_SEED", help="Random seed.")] = 1,
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            envvar="GPUAUDIT_OUTPUT",
            help="Snapshot file to write (.json or .json.gz).",
        ),
    ] = Path("scenario.snapshot.json.gz"),
    truth: Annotated[
        Path | None,
        typer.Option(
            "--truth", envvar="GPUAUDIT_TRUTH", help="Write the planted problems as JSON."
        ),
    ] = None,
    openmetrics: Annotated[
        Path | None,
        typer.Option(
            "--openmetrics",
            envvar="GPUAUDIT_OPENMETRICS",
            help="Write every sample as OpenMetrics for promtool backfill.",
        ),
    ] = None,
    k8s_dir: Annotated[
        Path | None,
        typer.Option(
            "--k8s-dir",
            envvar="GPUAUDIT_K8S_DIR",
            help="Write the Kubernetes objects as list JSON files.",
        ),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option(
            "--end", envvar="GPUAUDIT_END", help="Window end (default 2026-11-23T00:00:00Z)."
        ),
    ] = None,
    scrape_interval: Annotated[
        int,
        typer.Option(
            "--scrape-interval", envvar="GPUAUDIT_SCRAPE_INTERVAL", help="Seconds between samples."
        ),
    ] = 60,
    label_style: Annotated[
        str,
        typer.Option(
            "--label-style",
            envvar="GPUAUDIT_LABEL_STYLE",
            help="DCGM label spelling: helm (exported_pod), honor (pod) or old (pod_name).",
        ),
    ] = "helm",
) -> None:
    """Generate a deterministic cluster scenario with planted problems."""
    import json

    from gpuaudit.scenario import generate, k8s_lists, write_openmetrics, write_snapshot
    from gpuaudit.scenario.emit import LABEL_STYLES
    from gpuaudit.scenario.generator import DEFAULT_END

    try:
        if label_style not in LABEL_STYLES:
            raise ConfigError(f"--label-style must be one of {', '.join(LABEL_STYLES)}")
        end_ts = parse_end(end)
        end_i = int(end_ts) if end_ts is not None else DEFAULT_END
        end_i -= end_i % 3600
        try:
            sc = generate(gpus, days, seed, end=end_i, scrape_s=scrape_interval)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        cmd = (
            f"gpuaudit scenario --gpus {gpus} --days {days} --seed {seed} "
            f"--scrape-interval {scrape_interval} --label-style {label_style}"
        )
        write_snapshot(sc, output, label_style, cmd)
        if truth:
            _write(truth, json.dumps(sc.truth, indent=2, sort_keys=True) + "\n")
        if openmetrics:
            with open(openmetrics, "w", encoding="utf-8") as fh:
                write_openmetrics(sc, fh, label_style)
        if k8s_dir:
            k8s_dir.mkdir(parents=True, exist_ok=True)
            for name, lst in k8s_lists(sc).items():
                _write(k8s_dir / f"{name}.json", json.dumps(lst, indent=1, sort_keys=True))
    except GpuauditError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"cannot write scenario output: {exc}")


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("gpuaudit: interrupted\n")
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback
        if os.environ.get("GPUAUDIT_DEBUG"):
            raise
        sys.stderr.write(
            f"gpuaudit: internal error: {type(exc).__name__}: {exc}. This is a bug; rerun with "
            "GPUAUDIT_DEBUG=1 for details and report it.\n"
        )
        sys.exit(2)
