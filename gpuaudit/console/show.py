"""`gpuaudit snapshot show FILE`: what a snapshot holds, read back from the file (the manifest,
and what the answers and list pages actually contain), as plain text for a terminal.

Every name in a snapshot came from a cluster or a server: it is shown through `terminal()`, so
that an escape sequence in a label is printed as text, never run by the terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpuaudit import snapshot
from gpuaudit.report.text import count, num, plural, terminal
from gpuaudit.snapshot import Snapshot
from gpuaudit.snapshot.answers import Answer
from gpuaudit.sources.prometheus.stats import QuerySamples, SamplesRead

_WIDTH = 12
"""Width of the field names in the left column."""


def describe(path: Path, progress: Callable[[int, int], None] | None = None) -> str:
    """The description of the snapshot file `path`; `SnapshotError` when it cannot be read."""
    snap = snapshot.read(path, progress=progress)
    return text(snap, str(path))


def text(snap: Snapshot, name: str) -> str:
    """What `snap` holds, one field a line, then its queries and its Kubernetes objects."""
    m = snap.manifest
    w = m.window
    lines = [
        f"snapshot {terminal(name, 300)} (format {m.format_version}, "
        f"written by gpuaudit {terminal(m.gpuaudit_version, 40)})"
    ]

    def field(label: str, value: str) -> None:
        lines.append(f"{label:<{_WIDTH}}{value}")

    field("cluster", terminal(m.cluster or "(not recorded)"))
    origin = m.prometheus_url or m.generated_by or "(not recorded)"
    field("source", f"{terminal(m.source or 'unknown')}: {terminal(origin, 300)}")
    if m.collected_at:
        field("collected", terminal(m.collected_at))
    field(
        "window",
        f"{num(w.seconds / 3600, grouped=False)} h, {_utc(w.start)} to {_utc(w.end)} UTC, "
        f"step {_duration(w.step)}",
    )
    field("backend", _backend(m.capabilities))
    answers = sum(len(v) for v in snap.prometheus.values())
    field(
        "queries",
        f"{plural(len(snap.prometheus), 'query', 'queries')} answered, "
        f"{plural(answers, 'answer')} in all"
        + (f"; missing metrics: {', '.join(m.missing_metrics)}" if m.missing_metrics else ""),
    )
    read = m.samples_read
    lines += [
        "  " + _query_line(q, snap.prometheus[q], m.queries, read.queries.get(q) if read else None)
        for q in sorted(snap.prometheus)
    ]
    if read is not None:
        field("samples", terminal(read.total.text(), 200) + _interval(read))
    rec = _recorded(m.capabilities, m.queries)
    if rec:
        field("recorded", rec)
    if m.backend_timings:
        field("backend", "time per query kind, as gpuaudit waited and as the backend said:")
        lines += [f"  {_timing_line(k, v)}" for k, v in sorted(m.backend_timings.items())]
    field("kubernetes", _kube_summary(snap.kubernetes, m.objects))
    for res in sorted(set(m.objects) | set(snap.kubernetes)):
        state = m.objects.get(res, "not recorded")
        items = sum(len(p.get("items") or []) for p in snap.kubernetes.get(res, []))
        lines.append(f"  {terminal(res, 60):<26}{count(items):>8}  {terminal(state, 300)}")
    if m.complete:
        field("complete", "yes: every source answered in full")
    else:
        field("complete", "NO: " + terminal("; ".join(m.incomplete_reasons) or "not said", 2000))
    field("warnings", str(len(m.warnings)) if m.warnings else "none")
    lines.extend(f"  {terminal(x, 500)}" for x in m.warnings)
    return "\n".join(lines) + "\n"


def _duration(seconds: float) -> str:
    if seconds % 3600 == 0:
        return f"{num(seconds / 3600, grouped=False)} h"
    if seconds % 60 == 0:
        return f"{num(seconds / 60, grouped=False)} min"
    return f"{num(seconds, grouped=False)} s"


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M")


def _backend(caps: Mapping[str, Any]) -> str:
    """Backend, its version, the label spelling and what DCGM offers, from the capabilities."""
    if not caps:
        return "(not recorded)"
    parts = [terminal(str(caps.get("backend") or "unknown"))]
    version = caps.get("version")
    if version:
        parts[0] += f" {terminal(str(version), 40)}"
    if caps.get("label_style"):
        parts.append(f"pod label spelling {terminal(str(caps['label_style']), 40)}")
    metrics = caps.get("metrics")
    if isinstance(metrics, list):
        # Discovery records HAMi's and cAdvisor's metrics beside DCGM's: count them apart.
        dcgm = sum(1 for m in metrics if str(m).startswith("DCGM_"))
        text = plural(dcgm, "DCGM metric")
        if len(metrics) > dcgm:
            text += f" (+{plural(len(metrics) - dcgm, 'other metric')})"
        parts.append(text)
    for key, what in (("mig", "MIG"), ("profiling", "profiling metrics")):
        if key in caps:
            parts.append(f"{what} {'yes' if caps[key] else 'no'}")
    return ", ".join(parts)


def _query_line(
    qid: str,
    entries: list[dict[str, Any]],
    queries: tuple[Any, ...],
    samples: QuerySamples | None = None,
) -> str:
    meta = next((q for q in queries if isinstance(q, Mapping) and q.get("id") == qid), {})
    series = sum(len(e["answer"].metrics) for e in entries if isinstance(e.get("answer"), Answer))
    what = terminal(str(meta.get("metric") or ""), 60)
    reads = meta.get("reads")
    if isinstance(reads, str) and reads != "raw":
        what += f" ({terminal(reads, 30)} series)"
    return (
        f"{terminal(qid, 40):<23} {terminal(str(meta.get('kind') or ''), 10):<8}"
        f"{plural(len(entries), 'answer'):>11}{plural(series, 'series', 'series'):>14}  {what}"
        + (f"; {_samples(samples)}" if samples is not None else "")
    ).rstrip()


def _samples(s: QuerySamples) -> str:
    """A query's samples read: `1,234,567 samples read`, `(estimated)` where they are."""
    if s.how == "not known":
        return "samples read not known"
    said = s.how == "as the backend said"
    return f"{count(s.samples)} samples read" + ("" if said else f" ({s.how})")


def _interval(read: SamplesRead) -> str:
    """What the estimates took for the scrape interval, where some figure is estimated."""
    if read.interval_s is None or not read.total.estimated:
        return ""
    return f"; estimated at a {num(read.interval_s, grouped=False)} s scrape interval"


def _recorded(caps: Mapping[str, Any], queries: tuple[Any, ...]) -> str:
    """Which queries read gpuaudit's recorded series, and from when; empty when none did
    and discovery said nothing about them."""
    used = [
        str(q.get("id"))
        for q in queries
        if isinstance(q, Mapping)
        and q.get("reads")
        in ("recorded", "recorded and raw", "recorded hourly", "recorded hourly and raw")
    ]
    cov = caps.get("recorded") if isinstance(caps, Mapping) else None
    notes = caps.get("notes") if isinstance(caps, Mapping) else None
    said = [n for n in notes if isinstance(n, str)] if isinstance(notes, list) else []
    moved = [n for n in said if n.startswith("hourly rules read")]
    if used and moved:  # the window moved to the hourly rules' last evaluation: say so
        rest = moved[0].removeprefix("hourly rules read")
        text = f"{plural(len(used), 'query', 'queries')} read the hourly rules{rest}"
        return terminal(text, 300) + ": " + terminal(", ".join(sorted(used)), 400)
    if not used:
        notes = caps.get("notes") if isinstance(caps, Mapping) else None
        why = [n for n in notes if isinstance(n, str) and "recorded series" in n] if notes else []
        return terminal(why[0], 300) if isinstance(notes, list) and why else ""
    text = f"{plural(len(used), 'query', 'queries')} read recorded series"
    if isinstance(cov, Mapping) and isinstance(cov.get("since"), (int, float)):
        whole = cov.get("covers") == "whole"
        text += (
            " over the whole window"
            if whole
            else f" from {_utc(float(cov['since']))} UTC, raw series before"
        )
    return text + ": " + terminal(", ".join(sorted(used)), 400)


def _timing_line(kind: str, t: Any) -> str:
    if not isinstance(t, Mapping):
        return terminal(kind, 20)

    def sec(key: str) -> str:
        v = t.get(key)
        return f"{v:.1f} s" if isinstance(v, (int, float)) else "not given"

    n = int(t["queries"]) if isinstance(t.get("queries"), int) else 0
    have = int(t["with_stats"]) if isinstance(t.get("with_stats"), int) else 0
    backend = (
        f"backend evaluating {sec('evalTotalTime')} ({have} of {n} answers with stats)"
        if have
        else "the backend gave no stats"
    )
    samples = t.get("totalQueryableSamples")
    extra = f", {count(int(samples))} samples read" if isinstance(samples, (int, float)) else ""
    return f"{terminal(kind, 20):<10}{plural(n, 'query', 'queries')}, {sec('wall_s')} " + (
        f"waited, {backend}{extra}"
    )


def _kube_summary(pages: Mapping[str, list[dict[str, Any]]], objects: Mapping[str, str]) -> str:
    ok = sum(1 for v in objects.values() if v == "ok")
    if not objects and not pages:
        return "not read"
    return f"{plural(len(set(objects) | set(pages)), 'resource')} recorded, {ok} read in full"
