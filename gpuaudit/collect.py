"""Collect one snapshot from live sources: discovery, a query plan that fits the backend's
limits, and the raw answers recorded as they came.

The plan is fixed by the catalogue (`gpuaudit.queries`), not by the cluster: every query covers
every GPU at once. A query the backend refuses as too big (Prometheus's `--query.max-samples`,
the 11,000-points-per-series cap, Mimir's chunk limit, a query timeout) is cut in two along
time, and then, when one time chunk is still too big, sharded by the first hex digit of the GPU
UUID. How each query was cut is recorded in the manifest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import httpx

from gpuaudit import __version__, queries
from gpuaudit.answers import Interner, from_bytes, one_line, parse
from gpuaudit.errors import SourceError
from gpuaudit.snapshot import FORMAT_VERSION, Snapshot
from gpuaudit.sources.prometheus import PromClient, PromError

MAX_POINTS = 11_000
"""Prometheus's fixed cap on points per series in a range query."""
SHARDS = (
    '=~"GPU-[0-7].*"',
    '=~"GPU-[89a-fA-F].*"',
    '!~"GPU-[0-9a-fA-F].*"',
)
"""UUID label matchers that split all series into three disjoint parts."""
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Window:
    start: int
    end: int
    step: int

    @property
    def seconds(self) -> int:
        return self.end - self.start


def make_window(window_s: int, step_s: int, end: float | None) -> Window:
    """The audit window, its end aligned down to the step so hourly buckets line up."""
    if step_s <= 0 or window_s < step_s:
        raise SourceError("--window must be at least one --step long")
    if window_s % step_s:
        raise SourceError("--window must be a whole number of --step")
    now = datetime.now(timezone.utc).timestamp() if end is None else end
    e = int(now) - int(now) % step_s
    return Window(start=e - window_s, end=e, step=step_s)


@dataclass
class Capabilities:
    backend: str = "unknown"
    version: str = ""
    metrics: list[str] = field(default_factory=list)
    pod_label: str = "any"
    uuid_label: str = "UUID"
    mig: bool = False
    profiling: bool = False
    kube_state_metrics: bool = False
    recorded: list[str] = field(default_factory=list)
    """Metrics read through gpuaudit's recording rules (`gpuaudit rules`)."""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "version": self.version,
            "metrics": sorted(self.metrics),
            "pod_label": self.pod_label,
            "uuid_label": self.uuid_label,
            "mig": self.mig,
            "profiling": self.profiling,
            "kube_state_metrics": self.kube_state_metrics,
            "recording_rules": sorted(self.recorded),
            "notes": list(self.notes),
        }


def discover(client: PromClient, w: Window, selector: str) -> Capabilities:
    """What the backend is and which DCGM data it holds, from cheap metadata calls."""
    caps = Capabilities()
    path = httpx.URL(client.cfg.url).path
    try:
        info = client.buildinfo()
        if info.get("version"):
            caps.backend, caps.version = "prometheus", str(info["version"])
        else:
            caps.backend = "victoriametrics"  # answers buildinfo with an empty object
    except PromError as exc:
        if exc.status in (0,) and "cannot reach" in str(exc):
            raise
        caps.backend = "unknown"
        caps.notes.append(f"buildinfo unavailable: {str(exc)[:120]}")
    if "/prometheus" in path:
        caps.backend = "mimir/cortex" if caps.backend != "victoriametrics" else caps.backend
    try:
        names = set(client.metric_names(w.start, w.end))
        caps.metrics = sorted(n for n in names if n.startswith("DCGM_"))
        caps.kube_state_metrics = "kube_pod_container_resource_requests" in names
    except PromError as exc:
        caps.notes.append(f"metric names unavailable ({str(exc)[:100]}); querying all")
        caps.metrics = list(queries.DCGM_METRICS)
    caps.profiling = queries.ACT_PROF in caps.metrics
    probe = next(
        (m for m in (queries.FB_USED, queries.ACT_PROF, queries.UTIL) if m in caps.metrics), None
    )
    if probe:
        match = f"{probe}{{{selector}}}" if selector else probe
        try:
            labels = set(client.labels(match, w.start, w.end))
            if "exported_pod" in labels:
                caps.pod_label = "exported"
            elif labels & {"pod", "pod_name"}:
                caps.pod_label = "pod"
            caps.mig = "GPU_I_ID" in labels
            if "uuid" in labels and "UUID" not in labels:
                caps.uuid_label = "uuid"
        except PromError as exc:
            caps.notes.append(
                f"label names unavailable ({str(exc)[:100]}); reading both pod label spellings"
            )
    if not selector:
        try:
            from gpuaudit.rules import usable_metrics

            names = client.recording_rule_names()
            caps.recorded = sorted(usable_metrics(names) & set(caps.metrics))
        except PromError as exc:
            caps.notes.append(f"rules API unavailable ({str(exc)[:80]}); reading raw series")
    elif selector:
        caps.notes.append("recording rules not used: --cluster-label needs the raw series")
    return caps


@dataclass
class _Job:
    spec: queries.QuerySpec
    start: int
    end: int
    shard: str = ""


def _selector(base: str, uuid_label: str, shard: str) -> str:
    parts = [p for p in (base, f"{uuid_label}{shard}" if shard else "") if p]
    return ",".join(parts)


class Collector:
    """Runs the catalogue against one backend and records every answer."""

    def __init__(
        self,
        client: PromClient,
        w: Window,
        caps: Capabilities,
        selector: str = "",
        progress: Progress | None = None,
        as_arrays: bool = False,
    ) -> None:
        self.client, self.w, self.caps, self.selector = client, w, caps, selector
        self.progress = progress
        self.as_arrays = as_arrays
        self.intern = Interner()
        self.done = 0
        self.total = 0
        self.warnings: list[str] = []
        self.incomplete: list[str] = []
        self.plan: dict[str, list[list[Any]]] = {}

    def _tick(self, added: int = 0) -> None:
        self.total += added
        if self.progress:
            self.progress(self.done, self.total)

    def _record_warnings(self, qid: str, warnings: list[str]) -> None:
        for wtext in warnings:
            msg = f"{qid}: {wtext}"
            if msg not in self.warnings:
                self.warnings.append(msg)
            if not wtext.lower().startswith("promql"):
                reason = f"the backend answered {qid} in part: {wtext}"
                if reason not in self.incomplete:
                    self.incomplete.append(reason)

    def run(self, specs: list[queries.QuerySpec]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        jobs: list[_Job] = []
        for spec in specs:
            if spec.kind == "window":
                jobs.append(_Job(spec, self.w.start, self.w.end))
            else:
                jobs.extend(self._hourly_jobs(spec))
        self._tick(len(jobs))
        while jobs:
            job = jobs.pop(0)
            try:
                entry = self._run_one(job)
            except PromError as exc:
                if not exc.too_big:
                    raise
                parts = self._split(job)
                if not parts:
                    raise SourceError(
                        f"{job.spec.id}: the backend refuses even the smallest piece "
                        f"({job.end - job.start} s of one UUID shard): {exc}"
                    ) from None
                jobs[0:0] = parts
                self._tick(len(parts) - 1)
                continue
            out.setdefault(job.spec.id, []).append(entry)
            self.plan.setdefault(job.spec.id, []).append([job.start, job.end, job.shard])
            self.done += 1
            self._tick()
        for qid, entries in out.items():
            entries.sort(key=lambda e: (e["chunk"][0], e["chunk"][2]))
            self.plan[qid].sort(key=lambda c: (c[0], c[2]))
        return out

    def _hourly_jobs(self, spec: queries.QuerySpec) -> list[_Job]:
        n = self.w.seconds // self.w.step
        per = max(1, MAX_POINTS - 1)
        jobs = []
        i = 0
        while i < n:
            j = min(n, i + per)
            jobs.append(_Job(spec, self.w.start + i * self.w.step, self.w.start + j * self.w.step))
            i = j
        return jobs

    def _split(self, job: _Job) -> list[_Job]:
        steps = (job.end - job.start) // self.w.step
        if steps >= 2:
            mid = job.start + (steps // 2) * self.w.step
            return [
                _Job(job.spec, job.start, mid, job.shard),
                _Job(job.spec, mid, job.end, job.shard),
            ]
        if not job.shard:
            return [_Job(job.spec, job.start, job.end, s) for s in SHARDS]
        return []

    def _run_one(self, job: _Job) -> dict[str, Any]:
        sel = _selector(self.selector, self.caps.uuid_label, job.shard)
        spelling = self.caps.pod_label
        rec = job.spec.metric in self.caps.recorded
        if job.spec.kind == "window":
            expr = job.spec.promql(job.end - job.start, spelling, sel, rec)
            ans = self.client.query(expr, job.end)
        else:
            expr = job.spec.promql(self.w.step, spelling, sel, rec)
            ans = self.client.query_range(expr, job.start + self.w.step, job.end, self.w.step)
        self._record_warnings(job.spec.id, ans.warnings)
        entry: dict[str, Any] = {
            "query": expr,
            "params": ans.params,
            "chunk": [job.start, job.end, job.shard],
        }
        if self.as_arrays:
            # Parsed into arrays as it arrives (straight from its bytes where they are in the
            # usual compact form): no answer is held as Python lists and strings.
            where = f"prometheus.{job.spec.id}"
            entry["answer"] = (
                from_bytes(ans.raw, where, self.intern)
                if ans.raw
                else parse(ans.body, where, self.intern)
            )
        elif one_line(ans.raw):
            # Kept as the bytes the server sent (a tenth of their size as Python objects), to
            # be written into the snapshot as they are.
            entry["raw"] = ans.raw.strip()
        else:
            entry["body"] = ans.body
        return entry


def collect_prometheus(
    client: PromClient,
    w: Window,
    cluster_label: tuple[str, str] | None = None,
    progress: Progress | None = None,
    as_arrays: bool = False,
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Discover, plan and run every query. Returns the answers and the manifest fields.

    `as_arrays` (for a scan, which needs no raw text) keeps each answer parsed into arrays
    (`answer`) instead of its raw body (`body`, for a snapshot file)."""
    selector = ""
    if cluster_label:
        name, value = cluster_label
        esc = value.replace("\\", "\\\\").replace('"', '\\"')
        selector = f'{name}="{esc}"'
    caps = discover(client, w, selector)
    specs = [q for q in queries.CATALOGUE if q.metric in caps.metrics]
    missing = sorted({q.metric for q in queries.CATALOGUE} - set(caps.metrics))
    col = Collector(client, w, caps, selector, progress, as_arrays)
    answers = col.run(specs)
    fields = {
        "capabilities": caps.to_dict(),
        "queries": [
            {
                "id": q.id,
                "kind": q.kind,
                "metric": q.metric,
                "query": q.promql(
                    w.seconds if q.kind == "window" else w.step,
                    caps.pod_label,
                    selector,
                    q.metric in caps.recorded,
                ),
            }
            for q in specs
        ],
        "missing_metrics": missing,
        "plan": col.plan,
        "warnings": col.warnings,
        "incomplete_reasons": col.incomplete,
        "http_requests": client.requests,
    }
    return answers, fields


def build_snapshot(
    answers: dict[str, list[dict[str, Any]]],
    fields: dict[str, Any],
    w: Window,
    cluster: str,
    source_url: str,
    kubernetes: dict[str, list[dict[str, Any]]] | None = None,
    objects: dict[str, str] | None = None,
    extra_warnings: list[str] | None = None,
) -> Snapshot:
    warnings = list(fields.get("warnings", [])) + list(extra_warnings or [])
    reasons = list(fields.get("incomplete_reasons", []))
    manifest = {
        "format_version": FORMAT_VERSION,
        "gpuaudit_version": __version__,
        "cluster": cluster,
        "source": "prometheus",
        "prometheus_url": source_url,
        "collected_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "window": {"start": w.start, "end": w.end, "step": w.step, "seconds": w.seconds},
        "capabilities": fields["capabilities"],
        "objects": objects or {},
        "queries": fields["queries"],
        "missing_metrics": fields.get("missing_metrics", []),
        "plan": fields.get("plan", {}),
        "http_requests": fields.get("http_requests", 0),
        "complete": not reasons,
        "incomplete_reasons": reasons,
        "warnings": warnings,
    }
    return Snapshot(manifest=manifest, prometheus=answers, kubernetes=kubernetes or {})
