"""The command line. It only wires sources, snapshot, inventory, checks and reports together."""

from __future__ import annotations

import enum
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from gpuaudit import __version__
from gpuaudit.errors import ConfigError, GpuauditError

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


class Format(str, enum.Enum):
    table = "table"
    json = "json"


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
) -> None:
    """gpuaudit joins DCGM metrics with Kubernetes objects, finds GPU waste, ranks it by cost."""


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
    prometheus_url: Annotated[
        str | None,
        typer.Option(
            "--prometheus-url",
            envvar="GPUAUDIT_PROMETHEUS_URL",
            rich_help_panel=SOURCE,
            help="Collect live DCGM metrics from this Prometheus-compatible URL.",
        ),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            "--kubeconfig",
            envvar="GPUAUDIT_KUBECONFIG",
            rich_help_panel=SOURCE,
            help="Kubeconfig for reading pods, nodes and gang objects.",
        ),
    ] = None,
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            envvar="GPUAUDIT_CONTEXT",
            rich_help_panel=SOURCE,
            help="Kubeconfig context to use.",
        ),
    ] = None,
    window: Annotated[
        str | None,
        typer.Option(
            "--window",
            envvar="GPUAUDIT_WINDOW",
            rich_help_panel=WINDOW,
            help="How far back to audit, e.g. 7d, 24h (default 7d; live scans only).",
        ),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option(
            "--end",
            envvar="GPUAUDIT_END",
            rich_help_panel=WINDOW,
            help="End of the window: unix seconds or RFC 3339 (default now; live scans only).",
        ),
    ] = None,
    step: Annotated[
        str | None,
        typer.Option(
            "--step",
            envvar="GPUAUDIT_STEP",
            rich_help_panel=WINDOW,
            help="Bucket size of hourly series (default 1h; live scans only).",
        ),
    ] = None,
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
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            envvar="GPUAUDIT_CONFIG",
            rich_help_panel=CONFIG,
            help="Settings file (default ./gpuaudit.toml when present).",
        ),
    ] = None,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            envvar="GPUAUDIT_QUIET",
            rich_help_panel=OUTPUT,
            help="No progress or summary line on stderr.",
        ),
    ] = False,
) -> None:
    """Audit GPU usage and print ranked findings under a fleet summary.

    Exit codes: 0 nothing at or above --fail-on; 1 findings at or above it; 2 a usage error
    or a source that could not be read.
    """
    try:
        _scan(
            demo,
            snapshot,
            prometheus_url,
            kubeconfig,
            context,
            window,
            end,
            step,
            fmt,
            output,
            fail_on,
            config,
            quiet,
        )
    except GpuauditError as exc:
        _fail(str(exc))


def _scan(
    demo: bool,
    snapshot_path: Path | None,
    prometheus_url: str | None,
    kubeconfig: Path | None,
    context: str | None,
    window: str | None,
    end: str | None,
    step: str | None,
    fmt: Format,
    output: Path | None,
    fail_on: str,
    config: Path | None,
    quiet: bool,
) -> None:
    from gpuaudit import snapshot as snap_mod
    from gpuaudit.audit import run_checks
    from gpuaudit.findings import Severity
    from gpuaudit.inventory import build
    from gpuaudit.settings import load_config, parse_duration, settings_from

    threshold: Severity | None = None
    if fail_on.strip().lower() != "none":
        try:
            threshold = Severity.parse(fail_on)
        except ValueError as exc:
            raise ConfigError(f"--fail-on: {exc}") from None
    sources = [bool(demo), snapshot_path is not None, bool(prometheus_url)]
    if sum(sources) == 0:
        raise ConfigError("say what to audit: --demo, --snapshot FILE or --prometheus-url URL")
    if sum(sources) > 1:
        raise ConfigError("use only one of --demo, --snapshot and --prometheus-url")
    settings = settings_from(
        load_config(config),
        window_s=parse_duration(window) if window else None,
        step_s=parse_duration(step) if step else None,
        end=parse_end(end),
    )
    if prometheus_url:
        raise ConfigError(
            "live collection (--prometheus-url) is not available in this build yet; "
            "audit a snapshot with --snapshot FILE or try --demo"
        )
    path = demo_path() if demo else snapshot_path
    assert path is not None
    snap = snap_mod.read(path)
    inv = build(snap)
    result = run_checks(inv, settings)
    _emit(result, fmt, output)
    if not quiet:
        s = result.summary
        sys.stderr.write(
            f"gpuaudit: {len(result.findings)} findings, {s.idle_gpu_hours:,.0f} idle GPU-hours, "
            f"{s.wasted_cost:,.0f} {s.currency} wasted over {s.window_hours:.0f} h\n"
        )
    if threshold is not None and any(f.severity.rank >= threshold.rank for f in result.findings):
        raise typer.Exit(1)


def _emit(result: object, fmt: Format, output: Path | None) -> None:
    from rich.console import Console

    from gpuaudit.audit import AuditResult
    from gpuaudit.report import json_report, table

    assert isinstance(result, AuditResult)
    if fmt is Format.json:
        text = json_report.render(result)
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


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise GpuauditError(f"cannot write {path}: {exc.strerror or exc}") from None


@app.command(rich_help_panel="Reference")
def checks() -> None:
    """List every check with its stable code."""
    from rich.console import Console
    from rich.table import Table

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


@app.command(rich_help_panel="Reference")
def explain(code: Annotated[str, typer.Argument(help="A check code, e.g. GPU001.")]) -> None:
    """Print a check's documentation."""
    from gpuaudit.checks import BY_CODE, RETIRED

    c = BY_CODE.get(code.strip().upper())
    if c is None:
        if code.strip().upper() in RETIRED:
            print(f"{code.upper()} is retired: {RETIRED[code.strip().upper()]}")
            return
        known = ", ".join(sorted(BY_CODE))
        _fail(f"unknown check code {code!r}; known codes: {known}")
    print(c.doc)


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

    from gpuaudit import snapshot as snap_mod
    from gpuaudit.scenario import generate, k8s_lists, to_snapshot, write_openmetrics
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
        snap_mod.write(to_snapshot(sc, label_style, cmd), output)
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
