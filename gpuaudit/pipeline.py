"""One run, from a resolved `Config` to an `Outcome`: source, inventory, checks with waivers and
comparison, the report, the webhook and the exit code.

Nothing here prints: the report goes where the configuration says (a file, else stdout, the
report's own place); the summary line, the timings and errors are the caller's to print.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
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
from gpuaudit.inventory.window import requested as requested_window
from gpuaudit.report.markdown import summary as markdown_summary
from gpuaudit.report.webhook import post as post_webhook
from gpuaudit.snapshot import Snapshot
from gpuaudit.sources.prometheus import rules

Tick = Callable[[int, int], None]
"""Progress of a live collection: `tick(done, total)` as queries complete."""
ProgressBar = Callable[[], AbstractContextManager[Tick | None]]
"""Opens a progress display for a live collection and yields its tick (None to show nothing)."""


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
        s = self.result.summary
        note = "" if self.result.complete else " (INCOMPLETE: some sources answered in part)"
        return (
            f"gpuaudit: {len(self.result.findings)} findings, {s.idle_gpu_hours:,.0f} idle "
            f"GPU-hours, {s.wasted_cost:,.0f} {s.currency} wasted over {s.window_hours:.0f} h{note}"
        )

    def strict_line(self) -> str:
        """Why `--strict` ends the run with exit code 2."""
        reasons = "; ".join(self.result.incomplete_reasons)[:500]
        return f"gpuaudit: --strict: the audit is incomplete: {reasons}"

    def timings_line(self) -> str:
        """The stage timings as one JSON line (the benchmarks read it)."""
        return "gpuaudit-timings: " + json.dumps(dict(self.timings))


def run(config: Config, *, progress: ProgressBar | None = None) -> Outcome:
    """Audit what `config` names, write the report, post the webhook; say how to exit."""
    clock = _Stages()
    snap = load(config, progress, as_arrays=True)
    clock.mark("load")
    inv = build(snap, config.settings.topology_dir, narrowing(config, snap))
    del snap  # the raw answers are no longer needed; free them before the checks run
    clock.mark("inventory")
    against = config.baseline or config.previous
    previous = (against.name, load_report(against)) if against else None
    result = run_checks(
        inv,
        config.settings,
        waivers=config.waivers,
        group_label=config.group_by_label,
        previous=previous,
    )
    clock.mark("checks")
    write_report(result, config.format, config.output)
    clock.mark("render")
    if config.webhook:
        post_webhook(config.webhook, markdown_summary(result))
    return Outcome(result, exit_code(config, result), clock.stages)


def save_snapshot(config: Config, file: Path, *, progress: ProgressBar | None = None) -> int:
    """Collect live data and write it as a snapshot file; returns how many answers it holds."""
    snap = load(config, progress, as_arrays=False)
    try:
        snapshot.write(snap, file)
    except OSError as exc:
        raise GpuauditError(f"cannot write {file}: {exc.strerror or exc}") from None
    return sum(len(v) for v in snap.prometheus.values())


def load(config: Config, progress: ProgressBar | None = None, as_arrays: bool = False) -> Snapshot:
    """The snapshot `config` names: read from its file, or collected live (`as_arrays` for a
    scan: answers parsed as they arrive, no raw text kept)."""
    if config.live is None:
        if config.snapshot is None:
            raise ConfigError("say what to audit: --demo, --snapshot FILE or --prometheus-url URL")
        return snapshot.read(config.snapshot)
    s = config.settings
    with (progress or nullcontext)() as tick:
        return snapshot.collect_live(
            config.live, s.window_s, s.step_s, s.end, as_arrays=as_arrays, progress=tick
        )


def narrowing(config: Config, snap: Snapshot) -> tuple[float, float] | None:
    """The part of a snapshot's recorded window `--window`/`--end` ask to audit (None: all of
    it; a live scan collects its window instead)."""
    if config.live is not None:
        return None
    s = config.settings
    return requested_window(
        snap.manifest["window"], s.window_s if config.window_given else None, s.end
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


def write_report(result: AuditResult, fmt: str, output: Path | None) -> None:
    """The report in `fmt`, to `output` or stdout (the table in colour on a terminal)."""
    if fmt != "table":
        deliver(report.render(result, fmt), output)
    elif output:
        write_text(output, report.table_text(result))
    else:
        report.print_table(result, Console(highlight=False))


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
