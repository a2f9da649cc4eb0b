"""Changes for part-time reservations (GPU003): a KEDA `ScaledObject` (`keda.sh/v1alpha1`) that
scales the owning Deployment or StatefulSet to zero outside the hours it was busy, with one
`cron` trigger per busy window, a new object (KEDA v2.20.2's CRD, `keda-scaledobjects.json`).

The windows: the hours of day GPU003 found active (`active_hours_utc`, each active on at least
`checks.part_time_recurrence` of the days held) of every pod of the owner, joined where they
touch (across midnight too), each opened `MARGIN_MIN` minutes early so that the workload is up
when its work starts; windows less than `JOIN_GAP_MIN` minutes apart are one window (a scale to
zero and back for less than that only adds a cold start). Every day of the week: GPU003 finds
a daily pattern, recurring on most days, so no day is left out. The window ends at the end of
its last busy hour.

The time zone: gpuaudit cannot read a cluster's time zone, so the schedule is written in
`--timezone` (default UTC), KEDA's cron `timezone`: the busy hours, measured in UTC, are
shifted by the zone's offset at the window's end (a zone with daylight saving time moves them
an hour at its change; the file says so).

`minReplicaCount: 0`; `desiredReplicas` and `maxReplicaCount` are the replicas the owner ran
(its `spec.replicas` as read). None is written when: the owner is not a Deployment or
StatefulSet (a Job or a CronJob run ends on its own; a bare pod has nothing to scale), some pod
of the owner holding GPUs has no GPU003 finding (it may be busy at other hours), or the owner
was scaled to zero when read.

Where the owner's pods export a serving engine's queue or request gauge to the Prometheus
gpuaudit read (the one `serving_busy` query, `gpuaudit.inventory.serving_metrics`), a
`prometheus` trigger is added on the first of `SERVING_METRICS` they export (a queue first),
summed over the owner's pods (`serverAddress` the URL gpuaudit read, never with credentials; a
`# review:` note where that is a loopback address or the API server's proxy, which pods cannot
reach), `threshold` the measured busy level per pod, `activationThreshold` 0. The cron windows
stay as a floor: the metric comes from the pods themselves, so with no pod running nothing
exports it, and a prometheus trigger alone could never wake the workload from zero; outside
the windows the trigger keeps pods up while the metric shows work. Where the snapshot records
no Prometheus URL (a generated one), the note gives the trigger to add instead.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gpuaudit.checks.findings import Finding
from gpuaudit.fix.changes import (
    HOURS_PER_WEEK,
    Change,
    ChangeKind,
    FindingFix,
    Savings,
    Target,
    file_name,
    key,
)
from gpuaudit.fix.context import Context
from gpuaudit.inventory.owners import ObjectRef
from gpuaudit.sources.prometheus.catalogue import SERVING_METRICS

CODES = ("GPU003",)
SCALED = {"Deployment": "deployments", "StatefulSet": "statefulsets"}
API_VERSION = "keda.sh/v1alpha1"
MARGIN_MIN = 30
"""Minutes each window opens before its first busy hour."""
JOIN_GAP_MIN = 60
"""Windows closer than this (minutes, margins included) are joined into one."""
DAY_MIN = 24 * 60
MAX_NAME = 63
"""A ScaledObject's name is a label value on the HPA KEDA makes for it: at most 63 characters."""


def changes(
    findings: Sequence[Finding], ctx: Context
) -> tuple[list[Change], dict[str, FindingFix]]:
    """A ScaledObject per owner of part-time pods, and what each GPU003 finding gets."""
    fixes: dict[str, FindingFix] = {}
    groups: dict[str, list[Finding]] = defaultdict(list)
    tops: dict[str, ObjectRef] = {}
    for f in findings:
        top, why = ctx.top(f, "there is nothing to scale", "no ScaledObject")
        if top is None:
            fixes[key(f)] = FindingFix(None, "", None, why)
            continue
        tops[top.uid] = top
        groups[top.uid].append(f)
    members = ctx.members(set(groups))
    out: list[Change] = []
    for uid, group in groups.items():
        change, why = _scaled_object(group, tops[uid], ctx, members.get(uid, []))
        for f in group:
            if change is None:
                fixes[key(f)] = FindingFix(None, "", None, why)
            else:
                fixes[key(f)] = FindingFix(change.kind, change.file, change.target, why)
        if change is not None:
            out.append(change)
    return out, fixes


def _scaled_object(
    group: list[Finding], top: ObjectRef, ctx: Context, members: list[tuple[str, str]]
) -> tuple[Change | None, str]:
    read = ctx.inv.owners.read(top)
    if top.kind not in SCALED or read is None:
        return None, (
            f"gpuaudit writes a ScaledObject only for a Deployment or StatefulSet, and "
            f"{top.describe()} owns the pod; follow the recommendation"
        )
    found = {(f.resource.namespace, f.resource.name) for f in group}
    others = [m for m in members if m not in found]
    if others:
        return None, (
            f"{len(others)} of the {len(others) + len(found)} pods of {top.describe()} holding "
            "GPUs were not part-time: a schedule fitted to these pods' hours would stop them "
            "while busy"
        )
    spec = read.get("spec")
    replicas = spec.get("replicas", 1) if isinstance(spec, Mapping) else 1
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        replicas = 1
    if replicas == 0:
        return None, f"{top.describe()} was already scaled to zero when it was read"
    hours = sorted({int(h) for f in group for h in f.evidence.get("active_hours_utc") or ()})
    if not hours or not all(0 <= h < 24 for h in hours):
        return None, "the finding names no busy hours to schedule"
    zone, offset, shifts = _zone(ctx)
    windows = _windows(hours)
    if any(start == end for start, end in windows):
        return None, (
            "the busy hours, with their margins, cover the whole day: there is no hour to "
            "scale to zero"
        )
    target = Target(API_VERSION, "ScaledObject", top.namespace, _name(top.name), "scaledobjects")
    body = _body(target, top, replicas, windows, zone, offset)
    scaler = _prometheus(top, sorted(found), ctx)
    if scaler.trigger is not None:
        body["spec"]["triggers"].append(scaler.trigger)
    kept = sum((end - start) % DAY_MIN or DAY_MIN for start, end in windows) / 60.0
    said = ", ".join(_clock(s + offset) + "-" + _clock(e + offset) for s, e in windows)
    change = Change(
        kind=ChangeKind.OBJECT,
        file=file_name(group[0], f"scaledobject-{top.namespace}-{top.name}"),
        title=f"Scale {top.describe()} to zero outside {said} {zone} (KEDA {scaler.kind})",
        findings=tuple(group),
        savings=_savings(group, kept, ctx),
        risk=_risk(top, replicas, said, zone, shifts) + scaler.risk,
        target=target,
        body=body,
        notes=_notes(hours, said, zone, offset, shifts) + scaler.notes,
    )
    return change, (
        f"a KEDA ScaledObject scales {top.describe()} to {replicas} replica"
        f"{'s' if replicas != 1 else ''} {said} {zone} and to zero the rest of the day"
        + scaler.said
    )


@dataclass(frozen=True)
class _Scaler:
    """The `prometheus` trigger of a ScaledObject (None: cron alone) and what to say of it."""

    trigger: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()
    risk: str = ""
    said: str = ""

    @property
    def kind(self) -> str:
        return "cron" if self.trigger is None else "cron and prometheus"


def _prometheus(top: ObjectRef, pods: list[tuple[str, str]], ctx: Context) -> _Scaler:
    """The `prometheus` trigger on the first serving metric (`SERVING_METRICS`' order: a queue
    first) that the owner's pods export, summed over them, where the snapshot holds the serving
    answer and the Prometheus URL it was read from; else cron alone, and a note saying why."""
    served = ctx.inv.serving
    if not served.answered:
        return _Scaler(notes=("prometheus trigger: none (the snapshot holds no serving answer)",))
    levels = [served.levels.get(p, {}) for p in pods]
    metric = next((m for m in SERVING_METRICS if any(m in lv for lv in levels)), None)
    if metric is None:
        return _Scaler(
            notes=(
                "prometheus trigger: none (its pods exported no serving queue or request "
                "metric above 0 in the window)",
            )
        )
    had = [(p, lv[metric]) for p, lv in zip(pods, levels, strict=True) if metric in lv]
    level = sum(v for _, v in had) / len(had)
    threshold = _quantity(level)
    label = served.label.get(had[0][0], "pod")
    ns_label = "exported_namespace" if label == "exported_pod" else "namespace"
    matchers = [
        f'{ns_label}="{_promql_string(top.namespace)}"',
        f'{label}=~"{_promql_string(_pod_pattern(top))}"',
        *([served.selector] if served.selector else []),
    ]
    query = f"sum({metric}{{{','.join(matchers)}}})"
    measured = (
        f"prometheus trigger: {metric}, busy level {level:.2f} per pod (the mean over the "
        f"window's minutes it was above 0, of {len(had)} of {len(pods)} pods)"
    )
    if not served.server:
        return _Scaler(
            notes=(
                measured,
                "prometheus trigger: not written: the snapshot records no Prometheus URL for "
                f"serverAddress (add a prometheus trigger on {query}, threshold {threshold})",
            )
        )
    server, review = served.server, _unreachable(served.server)
    trigger = {
        "type": "prometheus",
        "metadata": {
            "serverAddress": server,
            "query": query,
            "threshold": threshold,
            "activationThreshold": "0",
        },
    }
    notes: tuple[str, ...] = (
        measured,
        f"prometheus trigger: threshold {threshold} (the busy level: KEDA keeps "
        f"ceil(sum / {threshold}) replicas, up to {top.describe()}'s replicas as read), "
        "activationThreshold 0 (outside the windows, pods stay while any request shows); the "
        "cron windows stay as a floor: the metric comes from the pods themselves, and with no "
        "pod running nothing exports it, so it cannot wake the workload from zero",
    )
    if review:
        notes += (f"review: {review}",)
    return _Scaler(
        trigger=trigger,
        notes=notes,
        risk=(
            f" Outside the windows the prometheus trigger keeps pods up while {metric} is "
            "above 0, until it has been 0 for KEDA's cooldownPeriod (300 s by default)."
        ),
        said=f", and keeps pods up outside them while {metric} shows work (KEDA prometheus)",
    )


def _quantity(level: float) -> str:
    """A busy level as KEDA's threshold: a decimal of at most 2 places (rounded up, but for
    a float's last bits: a live answer's mean may differ there from a replay's), at least
    0.01."""
    cents = math.ceil(round(level * 100, 6))
    return f"{max(cents, 1) / 100:.2f}".rstrip("0").rstrip(".")


def _promql_string(text: str) -> str:
    """`text` inside a PromQL double-quoted string."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _pod_pattern(top: ObjectRef) -> str:
    """The names of the owner's pods, as an RE2 pattern: a Deployment's
    `<name>-<pod-template-hash>-<5 characters>`, a StatefulSet's `<name>-<ordinal>`."""
    # Kubernetes names hold letters, digits, dashes and dots: a dot is escaped.
    name = "".join(c if c.isalnum() or c == "-" else "\\" + c for c in top.name)
    if top.kind == "StatefulSet":
        return f"{name}-[0-9]+"
    return f"{name}-[a-z0-9]+-[a-z0-9]+"


def _unreachable(url: str) -> str:
    """Why pods could not reach the Prometheus at `url` ("" where they may): a loopback or
    localhost address (a port-forward), or the API server's service proxy."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    try:
        loop = ipaddress.ip_address(host).is_loopback or host in ("0.0.0.0", "::")
    except ValueError:
        loop = host == "localhost" or host.endswith(".localhost")
    if loop:
        where = "a loopback address (a port-forward, most likely)"
    elif "/proxy" in parts.path:
        where = "the API server's service proxy"
    else:
        return ""
    return (
        f"gpuaudit read Prometheus at {url}, {where}, which pods cannot reach: set "
        "serverAddress to its in-cluster address (its Service, http://NAME.NAMESPACE.svc:PORT)"
    )


def _zone(ctx: Context) -> tuple[str, int, bool]:
    """The zone's name, its offset from UTC in minutes at the window's end, and whether the
    offset changed within the window (daylight saving time)."""
    name = ctx.timezone or "UTC"
    try:
        tz = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return "UTC", 0, False
    end = float(ctx.inv.window_end)
    start = end - float(ctx.inv.window_hours) * 3600.0

    def offset(at: float) -> int:
        delta = datetime.fromtimestamp(at, timezone.utc).astimezone(tz).utcoffset()
        return int(delta.total_seconds() // 60) if delta is not None else 0

    return name, offset(end), offset(start) != offset(end)


def _windows(hours: list[int]) -> list[tuple[int, int]]:
    """The busy hours of day (UTC) as (start, end) minutes of the day, each opened `MARGIN_MIN`
    early, joined where they touch or are less than `JOIN_GAP_MIN` apart; an end below its
    start crosses midnight."""
    spans: list[list[int]] = []
    for h in hours:
        if spans and spans[-1][1] == h * 60:
            spans[-1][1] = (h + 1) * 60
        else:
            spans.append([h * 60, (h + 1) * 60])
    opened = [[s - MARGIN_MIN, e] for s, e in spans]
    joined: list[list[int]] = []
    for s, e in opened:
        if joined and s - joined[-1][1] < JOIN_GAP_MIN:
            joined[-1][1] = e
        else:
            joined.append([s, e])
    # Across midnight: the last window joins the first where the gap between them is small (a
    # window that then closes on itself covers the whole day: start == end).
    if joined[0][0] + DAY_MIN - joined[-1][1] < JOIN_GAP_MIN:
        if len(joined) == 1:
            return [(joined[0][0] % DAY_MIN, joined[0][0] % DAY_MIN)]
        first = joined.pop(0)
        joined[-1][1] = first[1] + DAY_MIN
    return [(s % DAY_MIN, e % DAY_MIN) for s, e in joined]


def _clock(minute: int) -> str:
    m = minute % DAY_MIN
    return f"{m // 60:02d}:{m % 60:02d}"


def _cron(minute: int) -> str:
    """A daily cron schedule at `minute` of the day."""
    m = minute % DAY_MIN
    return f"{m % 60} {m // 60} * * *"


def _name(owner: str) -> str:
    """`<owner>-gpu-hours`, cut to a label value's 63 characters (a name from the cluster is
    a DNS name already: only its end is cut, and what ends it kept alphanumeric)."""
    tail = "-gpu-hours"
    head = owner[: MAX_NAME - len(tail)]
    return re.sub(r"[^a-z0-9]+$", "", head) + tail


def _body(
    target: Target,
    top: ObjectRef,
    replicas: int,
    windows: list[tuple[int, int]],
    zone: str,
    off: int,
) -> dict[str, Any]:
    triggers = [
        {
            "type": "cron",
            "metadata": {
                "timezone": zone,
                "start": _cron(start + off),
                "end": _cron(end + off),
                "desiredReplicas": str(replicas),
            },
        }
        for start, end in windows
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "ScaledObject",
        "metadata": {"name": target.name, "namespace": target.namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": top.api_version, "kind": top.kind, "name": top.name},
            "minReplicaCount": 0,
            "maxReplicaCount": replicas,
            "triggers": triggers,
        },
    }


def _savings(group: list[Finding], kept_h: float, ctx: Context) -> Savings:
    """The findings' GPU-hours outside their busy hours, less those the schedule keeps besides
    (its margins and joined gaps: per day, the hours kept beyond the busy ones x GPUs x days
    held), at the window's rate."""
    wasted = sum(f.impact.gpu_hours for f in group)
    extra = 0.0
    for f in group:
        busy = len(f.evidence.get("active_hours_utc") or ())
        days = float(f.evidence.get("days_held") or 0.0)
        gpus = float(f.evidence.get("gpus") or f.resource.gpus or 0.0)
        extra += max(kept_h - busy, 0.0) * gpus * days
    saved = max(wasted - extra, 0.0)
    share = saved / wasted if wasted > 0 else 0.0
    scale = HOURS_PER_WEEK / max(float(ctx.inv.window_hours), 1e-9)
    cost = sum(f.impact.cost for f in group) * share
    return Savings(gpu_hours=saved * scale, cost=cost * scale, currency=ctx.currency)


def _risk(top: ObjectRef, replicas: int, said: str, zone: str, shifts: bool) -> str:
    risk = (
        f"Outside {said} ({zone}) {top.describe()} runs no pod: work or requests that come "
        "then wait for the next window (or fail), and each window starts with a cold start "
        f"(the GPUs are scheduled again, the model loaded). KEDA owns its replicas from now: "
        f"remove `replicas` from its manifest (a GitOps controller would put {replicas} back) "
        "and any HorizontalPodAutoscaler on it (KEDA makes its own). Needs KEDA installed; "
        "to undo, delete the ScaledObject and scale it back."
    )
    if shifts:
        risk += (
            f" {zone} changed its offset from UTC within the window: the busy hours were "
            "placed by the offset at its end."
        )
    return risk


def _notes(hours: list[int], said: str, zone: str, offset: int, shifts: bool) -> tuple[str, ...]:
    busy = ", ".join(f"{h:02d}:00" for h in hours)
    sign = "+" if offset >= 0 else "-"
    lines = [
        f"busy hours (UTC, each the start of an hour): {busy}",
        f"schedule: {said} {zone} (UTC{sign}{abs(offset) // 60:02d}:{abs(offset) % 60:02d} at "
        f"the window's end), each window opened {MARGIN_MIN} min early, windows less than "
        f"{JOIN_GAP_MIN} min apart joined, every day of the week",
        "time zone: gpuaudit cannot read the cluster's; set --timezone (default UTC)",
    ]
    if shifts:
        lines.append(f"{zone} changed its offset within the window (daylight saving time)")
    return tuple(lines)
