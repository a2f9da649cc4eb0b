"""One run, from a resolved `Config` to an `Outcome`: source, inventory, checks with waivers and
comparison, the report, the webhook and the exit code.

Nothing here prints: the report goes where the configuration says (a file, else stdout, the
report's own place); the summary line, the timings and errors are the caller's to print.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter

from rich.console import Console

from gpuaudit import report, snapshot
from gpuaudit.audit import AuditResult, run_checks
from gpuaudit.compare import load_report
from gpuaudit.config import Config
from gpuaudit.errors import ConfigError, GpuauditError
from gpuaudit.inventory import build
from gpuaudit.progress import SILENT, Progress
from gpuaudit.report.markdown import summary as markdown_summary
from gpuaudit.report.text import money, num, plural
from gpuaudit.report.webhook import post as post_webhook
from gpuaudit.snapshot import Snapshot
from gpuaudit.sources.prometheus import rules


@dataclass(frozen=True)
class Outcome:
    """What a scan found and how the process should end."""

    result: AuditResult
    """The audit result the report was rendered from."""
    exit_code: int
    """0 nothing at or above `--fail-on`; 1 a finding at or above it; 2 incomplete under
    `--strict`."""
    timings: Mapping[str, float]
    """Wall seconds of each stage: load, inventory, checks, render."""

    def summary_line(self) -> str:
        """The one-line summary for stderr."""
        r = self.result
        s = r.summary
        note = "" if r.complete else " (INCOMPLETE: some sources answered in part)"
        left_out = [f"{len(r.suppressed):,} waived"] if r.suppressed else []
        if r.skipped:
            left_out.append(f"{plural(len(r.skipped), 'check')} skipped")
        aside = f" ({', '.join(left_out)})" if left_out else ""
        return (
            f"gpuaudit: {plural(len(r.findings), 'finding')}{aside}, {num(s.idle_gpu_hours)} "
            f"idle GPU-hours, {money(s.wasted_cost, s.currency)} wasted over "
            f"{num(s.window_hours)} h{note}"
        )

    def strict_line(self) -> str:
        """Why `--strict` ends the run with exit code 2."""
        reasons = "; ".join(self.result.incomplete_reasons)[:500]
        return f"gpuaudit: --strict: the audit is incomplete: {reasons}"

    def timings_line(self) -> str:
        """The stage timings as one JSON line (the benchmarks read it)."""
        return "gpuaudit-timings: " + json.dumps(dict(self.timings))


def run(config: Config, *, progress: Progress = SILENT) -> Outcome:
    """Audit what `config` names, write the report, post the webhook; say how to exit.
    `progress` is told of each stage as it goes."""
    clock = _Stages()
    snap = load(config, progress, as_arrays=True)
    clock.mark("load")
    with progress.stage("building the inventory"):
        inv = build(snap, config.settings.topology_dir)
    del snap  # the raw answers are no longer needed; free them before the checks run
    clock.mark("inventory")
    against = config.baseline or config.previous
    previous = (against.name, load_report(against)) if against else None
    with progress.stage("running the checks", "checks") as tick:
        result = run_checks(
            inv,
            config.settings,
            waivers=config.waivers,
            group_label=config.group_by_label,
            previous=previous,
            progress=tick,
        )
    clock.mark("checks")
    write_report(result, config.format, config.output, every=config.all_findings)
    clock.mark("render")
    if config.webhook:
        post_webhook(config.webhook, markdown_summary(result))
    return Outcome(result, exit_code(config, result), clock.stages)


def save_snapshot(config: Config, file: Path, *, progress: Progress = SILENT) -> int:
    """Collect live data and write it as a snapshot file; returns how many answers it holds."""
    snap = load(config, progress, as_arrays=False)
    try:
        snapshot.write(snap, file)
    except OSError as exc:
        raise GpuauditError(f"cannot write {file}: {exc.strerror or exc}") from None
    return sum(len(v) for v in snap.prometheus.values())


def load(config: Config, progress: Progress = SILENT, as_arrays: bool = False) -> Snapshot:
    """The snapshot `config` names: read from its file, or collected live (`as_arrays` for a
    scan: answers parsed as they arrive, no raw text kept)."""
    if config.live is None:
        if config.snapshot is None:
            raise ConfigError("say what to audit: --demo, --snapshot FILE or --prometheus-url URL")
        with progress.stage("loading the snapshot", "bytes") as tick:
            return snapshot.read(config.snapshot, progress=tick)
    s = config.settings
    return snapshot.collect_live(
        config.live, s.window_s, s.step_s, s.end, as_arrays=as_arrays, progress=progress
    )


def exit_code(config: Config, result: AuditResult) -> int:
    """2 when `--strict` and incomplete; 1 when a finding (with `--baseline`, a new or worse one)
    is at or above `--fail-on`; else 0."""
    if config.strict and not result.complete:
        return 2
    gating = result.findings
    if config.baseline:
        gating = tuple(f for f in result.findings if result.status_of(f) in ("new", "worse"))
    threshold = config.fail_on
    if threshold is not None and any(f.severity.rank >= threshold.rank for f in gating):
        return 1
    return 0


def write_report(
    result: AuditResult, fmt: str, output: Path | None, *, every: bool = False
) -> None:
    """The report in `fmt`, to `output` or stdout (the table in colour, as wide as the
    terminal, on a terminal). `every`: the table lists every finding (`--all`)."""
    if fmt != "table":
        deliver(report.render(result, fmt), output)
    elif output:
        write_text(output, report.table_text(result, every=every))
    else:
        report.print_table(result, Console(highlight=False), every=every)


def deliver(text: str, output: Path | None) -> None:
    """`text` to the file `output`, or to stdout."""
    if output:
        write_text(output, text)
    else:
        sys.stdout.write(text)


def write_text(path: Path, text: str) -> None:
    """Write a UTF-8 text file; failure is one clear error."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise GpuauditError(f"cannot write {path}: {exc.strerror or exc}") from None


def rules_text(fmt: str, pod_label: str) -> str:
    """The alerting and recording rules (`gpuaudit rules`)."""
    if pod_label not in ("exported", "pod"):
        raise ConfigError("--pod-label must be exported or pod")
    return rules.render(fmt, pod_label)


class _Stages:
    """Wall time per stage, from the start of the run."""

    def __init__(self) -> None:
        self._last = perf_counter()
        self.stages: dict[str, float] = {}

    def mark(self, name: str) -> None:
        now = perf_counter()
        self.stages[name] = round(now - self._last, 4)
        self._last = now
