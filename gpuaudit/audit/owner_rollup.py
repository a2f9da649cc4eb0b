"""The audit by owner (`--per-owner`): each owner's findings, GPU-hours and money, their rank
among owners, and the changes of `gpuaudit fix` that answer their findings. Computed once here,
so the per-owner reports only render.

An owner's GPU-hours are those their pods held (`gpuaudit.audit.breakdown.groups_of`, each pod
counted for its owner, `gpuaudit.inventory.ownership.of_pod`); their efficiency is the mean
engine activity of those GPU-hours, as the fleet's `mean_activity`. Owners are ranked among the
owners that held GPUs: by idle GPU-hours, most first, and by efficiency, least first (rank 1 is
who most needs to hear it); ties share a rank, in name order. Findings whose resource no key
names an owner of are one group, `unknown`, never dropped and never ranked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from gpuaudit.audit.breakdown import Group, groups_of
from gpuaudit.audit.compare import NEW, Comparison
from gpuaudit.audit.waivers import Suppressed
from gpuaudit.checks.findings import Finding
from gpuaudit.fix.changes import Change, Plan
from gpuaudit.inventory import Views, ownership

T = TypeVar("T")

UNKNOWN_KEY = "\x00unknown"
"""The key of the findings no owner is named for (an owner's name holds no control
character, so no owner has it)."""


@dataclass(frozen=True)
class Rank:
    """An owner's place among the owners that held GPUs."""

    place: int
    """1 for the first."""
    of: int
    """How many owners are ranked."""


@dataclass(frozen=True)
class OwnerSection:
    """One owner's part of the audit."""

    name: str | None
    """The owner as the cluster names it; None for the findings no owner is named for."""
    contact: str
    """Their first contact found (`gpuaudit.io/contact`), or empty."""
    sources: tuple[str, ...]
    """Where their name was read, each once, in rank order of their findings."""
    findings: tuple[Finding, ...]
    """Their findings, in the audit's rank order (related ones included)."""
    waived: tuple[Suppressed, ...]
    """Their findings a waiver accepted."""
    usage: Group | None
    """The GPU-hours their pods held, idle ones, their cost and mean activity; None when their
    pods held none."""
    wasted_gpu_hours: float
    """The GPU-hours of their findings counted toward the report's total."""
    wasted_cost: float
    idle_rank: Rank | None
    """By idle GPU-hours, most first; None when not ranked."""
    efficiency_rank: Rank | None
    """By mean activity of their GPU-hours, least first; None when not ranked."""
    changes: tuple[Change, ...]
    """The changes of `gpuaudit fix` that answer any of their findings."""
    new: tuple[str, ...] = ()
    """Fingerprints of their findings new since the earlier report (`--previous`)."""
    still_open: tuple[str, ...] = ()
    """Fingerprints of their findings the earlier report had too."""

    @property
    def known(self) -> bool:
        return self.name is not None


def key(name: str | None) -> str:
    """The grouping key of an owner's name."""
    return UNKNOWN_KEY if name is None else name


def sections(
    views: Views,
    idle_activity: float,
    findings: Sequence[Finding],
    suppressed: Sequence[Suppressed],
    fixes: Plan,
    keys: Sequence[str],
    comparison: Comparison | None = None,
) -> tuple[OwnerSection, ...]:
    """Every owner's section: the owners with findings, waived findings or GPU-hours held, by
    name, the unknown group last."""
    owners = views.inv.owners
    cache: dict[tuple[str, str], str] = {}

    def owner_of(namespace: str, pod: str) -> str:
        k = (namespace, pod)
        if k not in cache:
            cache[k] = key(ownership.of_pod(owners, namespace, pod, keys).name)
        return cache[k]

    usage = {g.key: g for g in groups_of(views, idle_activity, owner_of)}
    mine = _by_owner(findings, lambda f: f)
    waived = _by_owner(suppressed, lambda s: s.finding)
    names = sorted(set(usage) | set(mine) | set(waived), key=lambda k: (k == UNKNOWN_KEY, k))
    ranked = [usage[k] for k in names if k != UNKNOWN_KEY and k in usage]
    idle = _ranks(ranked, lambda g: -g.idle_gpu_hours)
    efficient = _ranks(
        [g for g in ranked if g.mean_activity is not None], lambda g: g.mean_activity or 0.0
    )
    out = []
    for k in names:
        fs = mine.get(k, [])
        counted = [f for f in fs if f.counted]
        prints = {f.fingerprint() for f in fs}
        status = comparison.status if comparison is not None else {}
        who = [f.owner for f in (*fs, *(s.finding for s in waived.get(k, []))) if f.owner]
        out.append(
            OwnerSection(
                name=None if k == UNKNOWN_KEY else k,
                contact=next((o.contact for o in who if o.contact), ""),
                sources=tuple(dict.fromkeys(o.source for o in who if o.source)),
                findings=tuple(fs),
                waived=tuple(waived.get(k, [])),
                usage=usage.get(k),
                wasted_gpu_hours=sum(f.impact.gpu_hours for f in counted),
                wasted_cost=sum(f.impact.cost for f in counted),
                idle_rank=idle.get(k),
                efficiency_rank=efficient.get(k),
                changes=tuple(
                    c for c in fixes.changes if any(f.fingerprint() in prints for f in c.findings)
                ),
                new=tuple(sorted(p for p in prints if status.get(p) == NEW)),
                still_open=tuple(sorted(p for p in prints if status.get(p, NEW) != NEW)),
            )
        )
    return tuple(out)


def _by_owner(items: Sequence[T], finding: Callable[[T], Finding]) -> dict[str, list[T]]:
    out: dict[str, list[T]] = {}
    for item in items:
        f = finding(item)
        out.setdefault(key(f.owner.name if f.owner else None), []).append(item)
    return out


def _ranks(groups: Sequence[Group], order: Callable[[Group], float]) -> dict[str, Rank]:
    """Standard competition ranking (1, 2, 2, 4) by `order`, ascending; ties in name order."""
    items = sorted(groups, key=lambda g: (round(order(g), 9), g.key))
    out: dict[str, Rank] = {}
    place, last = 0, None
    for i, g in enumerate(items):
        value = round(order(g), 9)
        if value != last:
            place, last = i + 1, value
        out[g.key] = Rank(place, len(items))
    return out
