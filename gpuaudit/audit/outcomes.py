"""What last week's findings became (`--previous`, `--history`): fixed, still open, waived, or
not verifiable this week; which findings are new; and the realized savings.

Findings are matched by fingerprint (`Finding.fingerprint`). A finding of the earlier report
that this audit no longer has is judged from this week's Kubernetes objects
(`gpuaudit.inventory.owners.Owners`), in this order:

- **waived**: a waiver now accepts it (it is among this audit's suppressed findings);
- **not verified**: its check did not run this week (skipped for lack of data), so its absence
  proves nothing; it is neither fixed nor open, and saves nothing;
- **fixed, gone**: the object that owns its pod (the finding's `evidence.owner` or its fix's
  target), or the pod, node or other object it names, is no longer among the objects read,
  whose list was read whole;
- **fixed, scaled down**: that owner is still there with `spec.replicas` 0;
- **fixed, no longer matches**: everything is still there (or could not be looked up), and the
  check ran and no longer finds it.

A finding in both reports is **still open**, for as many reports in a row as have listed it:
the earlier report's own `comparison.still_open[].weeks` plus one, else 2 (it was in the
earlier report and is in this one). With a weekly cron job a report is a week.

The **realized savings** are what the fixed findings were wasting, per week: each fixed finding's
earlier impact (GPU-hours and cost) scaled from the earlier report's window to 168 hours, each
GPU-hour once (`counted`): only the waste list's findings add up (a risk's GPU-hours were at
risk, not wasted); of the fixed findings on one resource (GPU001 and GPU021 on one pod share
their hours) the one with the most GPU-hours; and of a fixed node's finding and the fixed
findings on pods of that node, the larger side. The earlier report's own `counted_in_total` is
not used: a finding it left out because a finding still open shares its hours (GPU060's node
holding idle pods) saved its hours all the same. The cost is left out (null) when the earlier
report's currency is not this one's: gpuaudit has no exchange rate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gpuaudit.audit.waivers import Suppressed
from gpuaudit.checks.findings import Finding
from gpuaudit.core.errors import ConfigError
from gpuaudit.core.numbers import json_number
from gpuaudit.inventory.owners import KINDS, TARGETS, Owners
from gpuaudit.inventory.window import iso

WEEK_HOURS = 168.0
"""The hours of a week, the unit the realized savings are stated in."""

GONE, SCALED_DOWN, NO_LONGER_MATCHES = "gone", "scaled_down", "no_longer_matches"
"""How a fixed finding was judged fixed."""

_TEXT = 500
"""Characters kept of each text taken from the earlier report."""


@dataclass(frozen=True)
class Fixed:
    """A finding of the earlier report that this audit no longer has, judged fixed."""

    fingerprint: str
    code: str
    resource: str
    """`Pod ml/trainer-0`, as the earlier report named it."""
    how: str
    """`gone`, `scaled_down` or `no_longer_matches`."""
    why: str
    """A sentence that says how it was judged fixed."""
    gpu_hours_per_week: float | None
    """Its earlier wasted GPU-hours per week; None when the earlier report lacks them."""
    cost_per_week: float | None
    """Their earlier cost per week; None when unknown or in another currency."""
    counted: bool
    """Whether it adds to the realized savings (`_once`)."""


@dataclass(frozen=True)
class StillOpen:
    """A finding in the earlier report and in this one."""

    fingerprint: str
    code: str
    resource: str
    weeks: int
    """Reports in a row that have listed it, this one included."""
    first_seen: str
    """The end of the window of the first report that listed it (RFC 3339)."""


@dataclass(frozen=True)
class WaivedNow:
    """A finding of the earlier report that a waiver accepts now."""

    fingerprint: str
    code: str
    resource: str
    reason: str
    expires: str
    by: str


@dataclass(frozen=True)
class Unverified:
    """A finding of the earlier report this audit could not look for."""

    fingerprint: str
    code: str
    resource: str
    why: str


@dataclass(frozen=True)
class Savings:
    """What the fixed findings were wasting per week."""

    gpu_hours: float
    cost: float | None
    """None when the earlier report's currency is not this one's."""
    currency: str
    findings: int
    """The fixed findings that add up here."""


@dataclass(frozen=True)
class Outcomes:
    """What the earlier report's findings became."""

    fixed: tuple[Fixed, ...]
    still_open: tuple[StillOpen, ...]
    new: tuple[str, ...]
    """Fingerprints of this audit's findings the earlier report did not have, in rank order."""
    waived: tuple[WaivedNow, ...]
    unverified: tuple[Unverified, ...]
    savings: Savings
    previous_window_end: str
    """The end of the earlier report's window (RFC 3339); empty when it had none."""


def previous_window(doc: Mapping[str, Any]) -> tuple[float, float] | None:
    """The earlier report's window (start, end) in seconds; None when it has no valid one."""
    window = doc.get("window")
    if not isinstance(window, Mapping):
        return None
    try:
        start, end = (
            datetime.fromisoformat(str(window.get(k, "")).replace("Z", "+00:00")).timestamp()
            for k in ("start", "end")
        )
    except ValueError:
        return None
    return (start, end) if end > start else None


def vet(
    doc: Mapping[str, Any],
    flag: str,
    cluster: str,
    window: tuple[float, float],
    currency: str,
) -> tuple[str, ...]:
    """Refuse an earlier report that cannot be last week's, and warn about what cannot be
    trusted in one that may be. Refused (`ConfigError`): another cluster (both named: every
    finding would read as fixed) and a window that ends after this one's (it is no earlier
    report). Warned about: an overlapping window (the same hours are counted in both), a
    report without a window (its impact cannot be scaled to a week), another currency (the
    savings' cost is left out)."""
    warnings: list[str] = []
    theirs = doc.get("cluster")
    if isinstance(theirs, str) and theirs and cluster and theirs != cluster:
        raise ConfigError(
            f"{flag}: the earlier report is of cluster {theirs[:80]!r}, this audit of "
            f"{cluster[:80]!r}; compare reports of one cluster"
        )
    prev = previous_window(doc)
    if prev is None:
        warnings.append(
            f"{flag}: the earlier report has no window; its findings' GPU-hours cannot be "
            "scaled to a week, so the realized savings count none"
        )
    elif prev[1] > window[1]:
        raise ConfigError(
            f"{flag}: the earlier report's window ends {iso(prev[1])}, after this audit's "
            f"({iso(window[1])}); give an earlier report"
        )
    elif prev[1] > window[0]:
        warnings.append(
            f"{flag}: the earlier report's window ({iso(prev[0])} to {iso(prev[1])}) overlaps "
            f"this one's (from {iso(window[0])}): a finding fixed in the overlap reads as still "
            "open, and the overlapping hours are counted in both"
        )
    summary = doc.get("summary")
    theirs_cur = summary.get("currency") if isinstance(summary, Mapping) else None
    if isinstance(theirs_cur, str) and theirs_cur != currency:
        warnings.append(
            f"{flag}: the earlier report's costs are in {theirs_cur[:10]!r}, this one's in "
            f"{currency!r}; the realized savings state GPU-hours only"
        )
    return tuple(warnings)


def outcomes(
    doc: Mapping[str, Any],
    findings: Sequence[Finding],
    suppressed: Sequence[Suppressed],
    owners: Owners,
    checks_run: Sequence[str],
    skipped: Mapping[str, str],
    currency: str,
) -> Outcomes:
    """What the earlier report `doc`'s findings became in this audit (see the module's
    docstring). `skipped` maps each check code skipped this week to why."""
    prev: dict[str, Mapping[str, Any]] = {}
    for f in doc.get("findings", []):
        if isinstance(f, Mapping) and isinstance(f.get("fingerprint"), str):
            prev.setdefault(f["fingerprint"], f)
    window = previous_window(doc)
    scale = WEEK_HOURS * 3600 / (window[1] - window[0]) if window else None
    summary = doc.get("summary")
    same_currency = isinstance(summary, Mapping) and summary.get("currency") == currency
    open_before = _open_before(doc)
    end = iso(window[1]) if window else ""
    now = {f.fingerprint(): f for f in findings}
    waivers = {s.finding.fingerprint(): s for s in suppressed}
    ran = set(checks_run)
    index = _Index(owners)
    fixed: list[Fixed] = []
    still: list[StillOpen] = []
    waived: list[WaivedNow] = []
    unverified: list[Unverified] = []
    for fp, old in sorted(prev.items()):
        code, ref = _text(old.get("code")), _resource(old)
        if fp in now:
            weeks, first = open_before.get(fp, (1, end))
            still.append(StillOpen(fp, code, ref, weeks + 1, first))
        elif fp in waivers:
            w = waivers[fp].waiver
            waived.append(WaivedNow(fp, code, ref, w.reason, w.expires.isoformat(), w.by))
        elif code not in ran:
            why = skipped.get(code, "it did not run")
            unverified.append(Unverified(fp, code, ref, f"{code} did not run this week: {why}"))
        else:
            how, why = index.judge(old, code, ref)
            fixed.append(_fixed(fp, code, ref, how, why, old, scale, same_currency))
    fixed = _once(fixed, prev)
    counted = [f for f in fixed if f.counted]
    savings = Savings(
        gpu_hours=round(sum(f.gpu_hours_per_week or 0.0 for f in counted), 2),
        cost=round(sum(f.cost_per_week or 0.0 for f in counted), 2) if same_currency else None,
        currency=currency,
        findings=len(counted),
    )
    new = tuple(fp for fp in now if fp not in prev)
    return Outcomes(tuple(fixed), tuple(still), new, tuple(waived), tuple(unverified), savings, end)


def _fixed(
    fp: str,
    code: str,
    ref: str,
    how: str,
    why: str,
    old: Mapping[str, Any],
    scale: float | None,
    same_currency: bool,
) -> Fixed:
    impact = old.get("impact") if isinstance(old.get("impact"), Mapping) else {}
    assert isinstance(impact, Mapping)
    hours, cost = json_number(impact.get("gpu_hours")), json_number(impact.get("cost"))
    week_hours = None if hours is None or scale is None else round(hours * scale, 2)
    week_cost = (
        None if cost is None or scale is None or not same_currency else round(cost * scale, 2)
    )
    counted = old.get("category", "waste") == "waste" and week_hours is not None
    return Fixed(fp, code, ref, how, why, week_hours, week_cost, counted)


def _once(fixed: list[Fixed], prev: Mapping[str, Mapping[str, Any]]) -> list[Fixed]:
    """The fixed findings with `counted` set so that each GPU-hour adds up once (see the
    module's docstring)."""
    best: dict[tuple[str, str, str], Fixed] = {}
    for f in fixed:
        key = _key(prev[f.fingerprint])
        if f.counted and (key not in best or _hours(f) > _hours(best[key])):
            best[key] = f
    chosen = set(best.values())
    for (kind, _, node), nf in best.items():
        if kind != "Node":
            continue
        on_it = [
            f for k, f in best.items() if k[0] != "Node" and _node(prev[f.fingerprint]) == node
        ]
        if sum(_hours(f) for f in on_it) > _hours(nf):
            chosen.discard(nf)
        else:
            chosen.difference_update(on_it)
    return [dataclasses.replace(f, counted=f in chosen) for f in fixed]


def _hours(f: Fixed) -> float:
    return f.gpu_hours_per_week or 0.0


def _key(old: Mapping[str, Any]) -> tuple[str, str, str]:
    r = old.get("resource") if isinstance(old.get("resource"), Mapping) else {}
    assert isinstance(r, Mapping)
    return (_text(r.get("kind"), 63), _text(r.get("namespace"), 253), _text(r.get("name"), 253))


def _node(old: Mapping[str, Any]) -> str:
    r = old.get("resource") if isinstance(old.get("resource"), Mapping) else {}
    assert isinstance(r, Mapping)
    return _text(r.get("node"), 253)


def _open_before(doc: Mapping[str, Any]) -> dict[str, tuple[int, str]]:
    """Fingerprint -> (reports in a row, first seen) from the earlier report's own comparison."""
    comparison = doc.get("comparison")
    rows = comparison.get("still_open") if isinstance(comparison, Mapping) else None
    out: dict[str, tuple[int, str]] = {}
    for row in rows if isinstance(rows, list) else ():
        if not isinstance(row, Mapping) or not isinstance(row.get("fingerprint"), str):
            continue
        weeks = row.get("weeks")
        if isinstance(weeks, int) and not isinstance(weeks, bool) and 1 <= weeks <= 10_000:
            out[row["fingerprint"]] = (weeks, _text(row.get("first_seen"), 40))
    return out


def _text(value: object, limit: int = _TEXT) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _resource(old: Mapping[str, Any]) -> str:
    r = old.get("resource")
    if not isinstance(r, Mapping):
        return ""
    kind, ns, name = (_text(r.get(k), 253) for k in ("kind", "namespace", "name"))
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


_KEY_OF_KIND = {kind: key for (_, kind), key in KINDS.items()}
_KEY_OF_TARGET = {kind: key for key, kind in TARGETS.items()}


class _Index:
    """This week's objects by (kind, namespace, name)."""

    def __init__(self, owners: Owners) -> None:
        self.owners = owners
        self.objects: dict[tuple[str, str, str], Mapping[str, Any] | None] = {
            (n.ref.kind, n.ref.namespace, n.ref.name): n.obj for n in owners.nodes.values()
        }

    def _whole(self, key: str | None) -> bool:
        return key is not None and self.owners.states.get(key) == "ok"

    def judge(self, old: Mapping[str, Any], code: str, ref: str) -> tuple[str, str]:
        """(how, why) a finding absent this week was fixed."""
        r = old.get("resource") if isinstance(old.get("resource"), Mapping) else {}
        assert isinstance(r, Mapping)
        kind, ns, name = (_text(r.get(k), 253) for k in ("kind", "namespace", "name"))
        owner = _owner_of(old, ns)
        if owner is not None and owner[0] in _KEY_OF_KIND and owner[0] != "Pod":
            okind, oname = owner
            what = f"{okind} {ns}/{oname}"
            if (okind, ns, oname) not in self.objects:
                if self._whole(_KEY_OF_KIND[okind]):
                    return GONE, f"{what}, which owned it, is no longer in the cluster."
            else:
                obj = self.objects[(okind, ns, oname)] or {}
                spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
                assert isinstance(spec, Mapping)
                replicas = spec.get("replicas")
                if replicas == 0 and not isinstance(replicas, bool):
                    return SCALED_DOWN, f"{what}, which owned it, is scaled down to 0 replicas."
                return NO_LONGER_MATCHES, f"{what} is still there, and {code} no longer finds it."
        if kind == "Pod":
            present = (ns, name) in self.owners.pods
            if not present and self._whole("pods"):
                return GONE, f"The pod {ns}/{name} is no longer in the cluster."
        elif kind in _KEY_OF_TARGET:
            key = _KEY_OF_TARGET[kind]
            present = (key, ns, name) in self.owners.named
            if not present and self._whole(key):
                return GONE, f"{ref} is no longer in the cluster."
        return (
            NO_LONGER_MATCHES,
            f"{ref} is still there (or was not looked up), and {code} no longer finds it.",
        )


def _owner_of(old: Mapping[str, Any], namespace: str) -> tuple[str, str] | None:
    """The (kind, name) of the object that owned the finding's pod, as the earlier report
    said: its fix's target, else `evidence.owner` (`Deployment/llm`)."""
    fix = old.get("fix")
    target = fix.get("target") if isinstance(fix, Mapping) else None
    if isinstance(target, Mapping) and target.get("namespace") == namespace:
        kind, name = _text(target.get("kind"), 63), _text(target.get("name"), 253)
        if kind and name:
            return kind, name
    evidence = old.get("evidence")
    owner = evidence.get("owner") if isinstance(evidence, Mapping) else None
    if isinstance(owner, str) and "/" in owner and ":" not in owner:
        kind, _, name = owner.partition("/")
        if kind and name:
            return kind[:63], name[:253]
    return None
