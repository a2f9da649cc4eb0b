"""One run, from a resolved `Config` to an `Outcome`: source, inventory, checks with waivers and
comparison, the reports, the webhook and the exit code.

One collection feeds every output: the report goes where the configuration says (a file, else
stdout, the report's own place), then each `--report FORMAT=FILE`, then the webhook; the exit
code is decided last, so a failing gate never loses a report. An output that cannot be written
(or a webhook that cannot be posted to) does not stop the others: each is tried, and what
failed is in `Outcome.failures`, which make the run end with exit code 2. Nothing here prints:
the summary line, the timings and errors are the caller's to print.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import tempfile
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter

from rich.console import Console

from gpuaudit import report, snapshot
from gpuaudit.app import history, owner_files
from gpuaudit.app.config import Config, demo_path
from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.compare import load_report
from gpuaudit.core.errors import ConfigError, GpuauditError
from gpuaudit.core.gcpause import SCOPED, Collector
from gpuaudit.core.progress import SILENT, Progress
from gpuaudit.fix import directory
from gpuaudit.inventory import build
from gpuaudit.inventory.window import iso
from gpuaudit.inventory.window import requested as requested_window
from gpuaudit.report.text import money, num, plural, terminal
from gpuaudit.report.webhook_routes import post_all as post_webhooks
from gpuaudit.snapshot import Snapshot
from gpuaudit.sources.collect import unread
from gpuaudit.sources.interface import check_step
from gpuaudit.sources.prometheus import rules
from gpuaudit.sources.prometheus.promsource import NEWEST_SAID


@dataclass(frozen=True)
class Outcome:
    """What a scan found and how the process should end."""

    result: AuditResult
    """The audit result the reports were rendered from."""
    exit_code: int
    """See `exit_code`: 0, 1 or 2."""
    timings: Mapping[str, float]
    """Wall seconds of each stage: load, inventory, checks, render."""
    hint: str = ""
    """What to check when nothing was audited, for the source the run read."""
    failing: str = ""
    """Why the gate fails (exit code 1), as `failing_line` says it; empty when it passes."""
    failures: tuple[str, ...] = ()
    """The outputs that could not be written and the webhook that could not be posted to, one
    sentence each (`cannot write ...`); any makes the process end with exit code 2 (`code`)."""
    moved: str = ""
    """Where a live scan's window ended other than asked (`moved_line`), else empty."""

    @property
    def code(self) -> int:
        """The process's exit code: 2 when an output failed, else the gate's (`exit_code`)."""
        return 2 if self.failures else self.exit_code

    def summary_line(self) -> str:
        """The one-line summary for stderr: findings (and how many were waived), idle
        GPU-hours, waste, and how many checks ran and were skipped."""
        r, s = self.result, self.result.summary
        note = ""
        if r.nothing_audited:
            note = " (INCOMPLETE: nothing was audited)"
        elif not r.complete:
            note = " (INCOMPLETE: some sources answered in part)"
        aside = f" ({len(r.suppressed):,} waived)" if r.suppressed else ""
        return (
            f"gpuaudit: {plural(len(r.findings), 'finding')}{aside}, {num(s.idle_gpu_hours)} "
            f"idle GPU-hours, {money(s.wasted_cost, s.currency)} wasted over "
            f"{num(s.window_hours)} h; {plural(len(r.checks_run), 'check')} ran, "
            f"{len(r.skipped):,} skipped{note}"
        )

    def nothing_line(self) -> str | None:
        """The warning printed when the audit audited nothing (even with `--quiet`), else
        None."""
        if not self.result.nothing_audited:
            return None
        reasons = "; ".join(
            r.removeprefix("nothing was audited: ") for r in self.result.nothing_audited
        )
        hint = f" {self.hint}" if self.hint else ""
        return (
            f"gpuaudit: WARNING: NOTHING WAS AUDITED: {reasons[:500]}. The report is marked "
            f"incomplete; its zero findings do not mean healthy GPUs.{hint}"
        )

    def strict_line(self) -> str:
        """Why the run ends with exit code 2 although the audit ran."""
        if self.result.nothing_audited:
            return "gpuaudit: exit code 2: an audit that audited nothing never passes a gate"
        skipped = unread_skips(self.result)
        reasons = "; ".join(self.result.incomplete_reasons) or "; ".join(
            dict.fromkeys(s.reason for s in self.result.skipped if s.code in skipped)
        )
        verb = "was" if len(skipped) == 1 else "were"
        tail = f" ({', '.join(skipped)} {verb} skipped for it)" if skipped else ""
        return f"gpuaudit: exit code 2: the audit is incomplete: {terminal(reasons, 500)}{tail}"

    def timings_line(self) -> str:
        """The stage timings as one JSON line (the benchmarks read it)."""
        return "gpuaudit-timings: " + json.dumps(dict(self.timings))


def run(config: Config, *, progress: Progress = SILENT, collector: Collector = SCOPED) -> Outcome:
    """Audit what `config` names, write every report, post the webhook; then say how to
    exit. `progress` is told of each stage as it goes; `collector` is how the audit treats the
    cyclic collector (the caller owns the process: only a one-command process freezes)."""
    clock = _Stages()
    result = audit(config, progress, collector, clock)
    failures = write_reports(config, result)
    if config.history is not None:
        text = report.render(result, "json")
        failures += history.keep(config.history, text, result.window_end, config.history_keep)
    if config.per_owner is not None:
        failures += owner_files.write(result, config.per_owner)
    clock.mark("render")
    if config.webhook:  # the routes too: with --webhook only, within one deadline in all
        failures += post_webhooks(result, config.webhook, config.webhooks)
    code = exit_code(config, result)
    why = failing_line(config, result) if code == 1 else ""
    hint, moved = _hint(config, result), moved_line(config, result)
    return Outcome(result, code, clock.stages, hint, why, tuple(failures), moved)


def moved_line(config: Config, result: AuditResult) -> str:
    """A live scan's window ends on the step's grid unless gpuaudit's hourly recording rules
    moved it to their last evaluation (`gpuaudit.sources.prometheus.hourly`): then one line that
    says so, else empty."""
    step, end = config.settings.step_s, result.window_end
    if config.live is None or not step or end % step == 0:
        return ""
    return (
        f"gpuaudit: the window ends at {iso(end)}, on the last evaluation of gpuaudit's hourly "
        "recording rules before the end asked for, whose recorded series it read"
    )


def audit(
    config: Config,
    progress: Progress = SILENT,
    collector: Collector = SCOPED,
    clock: _Stages | None = None,
) -> AuditResult:
    """Load what `config` names, build the inventory and run the checks: the audit every
    command that audits shares (`scan`, `fix`). `clock` is told of each stage's end."""
    clock = clock or _Stages()
    snap = load(config, progress, as_arrays=True)
    clock.mark("load")
    with progress.stage("building the inventory"):
        inv = build(snap, config.settings.topology_dir, narrowing(config, snap), consume=True)
    if config.live is not None:  # a snapshot's buckets were fixed when it was recorded
        check_step(config.settings.step_s, inv.scrape_interval_s)
    del snap  # the raw answers are no longer needed; free them before the checks run
    collector.settled()
    clock.mark("inventory")
    against = config.baseline or config.previous
    flag = "--baseline" if config.baseline else "--previous"
    previous = (against.name, load_report(against, flag)) if against else None
    kept = history.read(config.history, config.history_keep) if config.history else None
    if previous is None and kept is not None:
        flag, previous = history.FLAG, kept.before(inv.window_end)
    with progress.stage("running the checks", "checks") as tick:
        result = run_checks(
            inv,
            config.settings,
            waivers=config.waivers,
            group_label=config.group_by_label,
            previous=previous,
            progress=tick,
            what_if=config.what_if,
            idle_rule=config.idle_rule,
            collector=collector,
            per_owner=config.per_owner is not None,
            follow_up="" if config.baseline else flag,
            namespaces=config.namespaces,
        )
    clock.mark("checks")
    if kept is not None:
        result = history.with_weeks(result, kept, config.history_keep)
    return result


@dataclass(frozen=True)
class FixOutcome:
    """What `gpuaudit fix` wrote."""

    result: AuditResult
    written: tuple[Path, ...]

    def summary_line(self, folder: Path) -> str:
        """The one-line summary for stderr."""
        plan = self.result.fixes
        kinds = [c.kind.value for c in plan.changes]
        named = (("patch", "patches"), ("object", ""), ("command", ""))
        parts = [plural(kinds.count(k), k, many) for k, many in named if kinds.count(k)]
        none = sum(1 for v in plan.fixes.values() if v.kind is None)
        return (
            f"gpuaudit fix: {plural(len(plan.changes), 'change')} "
            f"({', '.join(parts) or 'none'}) written to {folder}; "
            f"{plural(none, 'finding')} of fixable checks got none (README.md says why)"
        )


def fix(
    config: Config, folder: Path, *, progress: Progress = SILENT, collector: Collector = SCOPED
) -> FixOutcome:
    """Audit what `config` names and write its changes into `folder` (new or empty): patches,
    a kustomize Component listing them, `apply.sh`, `commands.sh` and a README (see
    `gpuaudit.fix.directory`). Nothing is sent to the cluster."""
    result = audit(config, progress, collector)
    source = (
        "the bundled demo"
        if config.snapshot is not None and config.snapshot == demo_path()
        else f"snapshot {config.snapshot.name}"
        if config.snapshot is not None
        else "the live cluster"
    )
    about = directory.About(
        cluster=result.cluster or "(unnamed)",
        window=f"{iso(result.window_start)} to {iso(result.window_end)} "
        f"({(result.window_end - result.window_start) / 3600:,.0f} h)",
        source=source,
    )
    texts = directory.files(result.fixes, about, directory.unfixed(result.fixes, result.findings))
    written = directory.write(texts, folder)
    return FixOutcome(result, tuple(written))


def write_reports(config: Config, result: AuditResult) -> list[str]:
    """The report (`--format`, to `--output` or stdout) and every `--report`, each written
    whatever became of the others; why each that could not be written failed."""
    targets = [(config.format, config.output), *((t.format, t.path) for t in config.reports)]
    said = (_failure(result, fmt, path, config.all_findings) for fmt, path in targets)
    return [why for why in said if why]


def _failure(result: AuditResult, fmt: str, path: Path | None, every: bool) -> str:
    """Write one report; why it failed, or empty."""
    try:
        write_report(result, fmt, path, every=every)
    except GpuauditError as exc:
        return str(exc)
    return ""


def save_snapshot(
    config: Config, file: Path, *, progress: Progress = SILENT, side_file: bool = True
) -> int:
    """Collect live data and write it as a snapshot file; returns how many answers it holds.
    `side_file`: write its columnar side-file beside it too (`snapshot.index`), so that the
    first scan of it already skips parsing its text."""
    snap = load(config, progress, as_arrays=False)
    try:
        snapshot.write(snap, file)
    except OSError as exc:
        raise GpuauditError(f"cannot write {file}: {exc.strerror or exc}") from None
    answers = sum(len(v) for v in snap.prometheus.values())
    del snap  # the raw answers are on disk; the side-file is made from the file itself
    if side_file:
        with progress.stage("writing the columnar side-file"):
            try:
                snapshot.index(file)
            except GpuauditError as exc:
                raise GpuauditError(f"{file} was written, but not its side-file: {exc}") from None
    return answers


def load(config: Config, progress: Progress = SILENT, as_arrays: bool = False) -> Snapshot:
    """The snapshot `config` names: read from its file, or collected live (`as_arrays` for a
    scan: answers parsed as they arrive, no raw text kept)."""
    if config.live is None:
        if config.snapshot is None:  # `gpuaudit.app.config` never makes such a configuration
            raise TypeError("a configuration names a snapshot file or a live source")
        with progress.stage("loading the snapshot", "bytes") as tick:
            return snapshot.read(config.snapshot, progress=tick)
    s = config.settings
    return snapshot.collect_live(
        config.live, s.window_s, s.step_s, s.end, as_arrays=as_arrays, progress=progress
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
    """2 when the audit audited nothing and a gate was asked for (`--fail-on` other than none,
    or `--strict`): an empty audit never passes a gate; 2 when `--strict` and incomplete; 1
    when a finding (with `--baseline`, a new or worse one) is at or above `--fail-on`; else
    0."""
    if result.nothing_audited and (config.strict or config.fail_on is not None):
        return 2
    if config.strict and (not result.complete or unread_skips(result)):
        return 2
    gating = result.findings
    if config.baseline:
        gating = tuple(f for f in result.findings if result.status_of(f) in ("new", "worse"))
    threshold = config.fail_on
    if threshold is not None and any(f.severity.rank >= threshold.rank for f in gating):
        return 1
    return 0


def unread_skips(result: AuditResult) -> tuple[str, ...]:
    """The codes of the checks skipped because a source that was asked for could not be read
    (a list the API server refused or failed to give: `gpuaudit.sources.collect.unread`);
    `--strict` never passes such an audit, even one whose sources said it was complete."""
    return tuple(s.code for s in result.skipped if unread(s.reason))


def failing_line(config: Config, result: AuditResult) -> str:
    """Why the gate fails, for stderr: `gpuaudit: failing: 3 findings at or above high (2
    new)`, counting the findings that gate (with `--baseline`, the new and worse ones) and,
    against an earlier report, how many of them are new or worse."""
    threshold = config.fail_on
    if threshold is None:
        return ""
    gating = [f for f in result.findings if f.severity.rank >= threshold.rank]
    if config.baseline:
        gating = [f for f in gating if result.status_of(f) in ("new", "worse")]
    statuses = [result.status_of(f) for f in gating]
    parts = [f"{statuses.count(s):,} {s}" for s in ("new", "worse") if statuses.count(s)]
    aside = f" ({', '.join(parts)})" if parts else ""
    return (
        f"gpuaudit: failing: {plural(len(gating), 'finding')} at or above {threshold.value}{aside}"
    )


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
    """Write a UTF-8 text file whole or not at all (a reader never sees half a report: it is
    written to a new file of its own beside it, created exclusively, and renamed over it; a
    device or pipe such as `/dev/stdout` is written directly); failure is one clear error."""
    try:
        if path.exists() and not path.is_file() and not path.is_dir():
            path.write_text(text, encoding="utf-8")
            return
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if path.exists() and not os.access(path, os.W_OK):
            raise PermissionError(errno.EACCES, "the file is read-only")
        _replace(path, text.encode("utf-8"))
    except OSError as exc:
        raise GpuauditError(f"cannot write {path}: {_why_unwritable(path, exc)}") from None


def _replace(path: Path, data: bytes) -> None:
    """`data` into a new file beside `path` (a short name, whatever the length of `path`'s,
    created exclusively: never through a planted link), then renamed over `path`, with the
    mode a new file gets (or the mode `path` had)."""
    fd, part = tempfile.mkstemp(prefix=".gpuaudit-", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), _mode_for(path))
            fh.write(data)
        os.replace(part, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(part)
        raise


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def _why_unwritable(path: Path, exc: OSError) -> str:
    """Why `path` could not be written, as the end of a sentence that says what to try."""
    parent = path.parent
    if exc.errno == errno.ENAMETOOLONG:
        return (
            f"the name is too long for the file system ({len(os.fsencode(path.name))} bytes); "
            "choose a shorter one"
        )
    if exc.errno == errno.EISDIR:
        return "it is a folder; name a file"
    if exc.errno == errno.ENOTDIR or (parent.exists() and not parent.is_dir()):
        return "a part of its path is a file, not a folder; choose another path"
    if exc.errno == errno.ENOENT and not parent.exists():
        return f"its folder {parent} does not exist; create it first"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{exc.strerror or 'permission denied'}; choose a path you can write to"
    return f"{exc.strerror or exc}; choose another path"


def _hint(config: Config, result: AuditResult) -> str:
    """What to check when a run audited nothing, for the source the run read: for a live scan
    whose backend holds DCGM data outside the window, where its newest sample is."""
    if config.live is None:
        return "Check that the snapshot holds DCGM series in the window."
    for reason in result.incomplete_reasons:
        _, found, rest = reason.partition(f"; {NEWEST_SAID} ")
        if found:
            return f"The backend's newest DCGM sample is from {rest}."
    label = config.live.cluster_label
    named = label and (label.name if label.grouped else f"{label.name}={label.value}")
    where = f", and that --cluster-label {named} names a cluster it holds" if label else ""
    return (
        "Check that this Prometheus holds dcgm-exporter series in the window (--window, "
        f"--end){where}."
    )


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
