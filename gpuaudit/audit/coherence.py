"""One pass after the checks that makes the findings agree with each other.

Checks run independently (no check imports another), so two of them can speak about the same
node, pod or GPU-hours without knowing it. Four rules, applied to the ranked findings:

1. No recommendation places work on a node, or next to a GPU, that another finding says to take
   out of service (`Finding.drains`). A finding whose `targets` meet a drain takes the first of
   its `alternatives` whose nodes are clear and says why it moved; with none, it keeps its
   target and says why no other one was offered, naming the finding that drains it.
2. A resource with several findings in one list (the risks or the waste, see
   `gpuaudit.checks.findings.Category`) gets one primary finding there, the first in rank
   order: the most urgent of its risks, the largest of its waste (its most wasted GPU-hours).
   The others of that list are marked `primary=False` and shown under it; each finding lists
   the codes of every other finding on the resource, of either list, in `related`. A resource
   with both a risk and waste so leads a row in each list: a risk never hides the GPU-hours
   of its resource's waste from the waste's ranking, nor waste the risk.
3. Fleet totals never count a GPU-hour twice: findings whose GPU-hours may overlap (the same
   resource, or a pod a GPU or gang finding names in `Finding.pods`) form one group, and only
   the group's largest impact counts (`counted=True`). The total of the counted impacts is a
   floor: no GPU-hour in it is counted twice.
4. No recommendation places work on a node that another finding says to release
   (`Finding.releases`, GPU060's idle nodes) without both saying so, applied right after
   rule 1 (on the targets it leaves): the finding that places work there (a move onto its
   unheld GPUs, GPU031) says that it uses capacity the other would release, and the releasing
   finding names the work placed on its node; both give the one plan that honours both: keep
   the GPUs the work needs there, and release what the work leaves instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from gpuaudit.checks.findings import Alternative, Category, Drain, Finding, Impact, rank

EXPLAIN = """In reports
    After the checks, one pass makes the findings agree:
    - no recommendation places work on a node, or next to a GPU, that another finding says to
      take out of service: it names another node when the check offered one, else it says which
      finding drains the node and to wait for it (evidence `coherence`);
    - a resource with several findings has one primary finding in each list it is in (the
      risks, the waste), the first in rank order; the others of that list are shown under it,
      and every other finding's code on the resource is among its `related` codes;
    - the report's total (`summary.findings_gpu_hours`) counts no GPU-hour twice: of findings
      that share a resource or name a pod in common, only the largest impact counts
      (`counted_in_total`);
    - no recommendation places work on a node another finding says to release (an idle node,
      GPU060) without both saying so: the one placing work there says it uses capacity the
      other would release, the other names that work, and both say to keep the GPUs it needs
      and release what it leaves instead (evidence `coherence`)."""
"""The part of every check's `explain` text that says how reports combine findings."""


@dataclasses.dataclass(frozen=True)
class Totals:
    """The findings' impact with every GPU-hour counted once."""

    gpu_hours: float
    """Sum of the impacts of the counted findings (`Finding.counted`)."""
    cost: float
    """Their cost, at the configured prices."""
    groups: int
    """Groups of findings that may share GPU-hours; one finding of each counts."""


def make_coherent(findings: Sequence[Finding]) -> tuple[tuple[Finding, ...], Totals]:
    """The findings in rank order with the four rules applied, and their de-duplicated total."""
    ranked = list(rank(findings))
    ranked = _keep_off_drained(ranked)
    ranked = _agree_on_releases(ranked)
    ranked = _primaries(ranked)
    ranked, totals = _count_once(ranked)
    return tuple(ranked), totals


# ---- rule 1: recommendations keep off what another finding drains -----------------------


def _keep_off_drained(findings: list[Finding]) -> list[Finding]:
    drains: list[tuple[Drain, Finding]] = [(d, f) for f in findings for d in f.drains]
    if not drains:
        return findings
    out: list[Finding] = []
    for f in findings:
        hits = _hits(f.targets, drains, f)
        if not hits:
            out.append(f)
            continue
        choice = next((a for a in f.alternatives if not _hits(a.targets, drains, f)), None)
        out.append(_moved(f, choice, hits) if choice else _kept(f, hits))
    return out


def _hits(
    targets: Sequence[str], drains: list[tuple[Drain, Finding]], own: Finding
) -> list[tuple[Drain, Finding]]:
    """The drains of other findings on any of `targets`."""
    nodes = set(targets)
    return [(d, f) for d, f in drains if d.node in nodes and f is not own]


def _why(hits: list[tuple[Drain, Finding]]) -> str:
    """`GPU070 says to drain node n1` / `... to free GPU G on node n1 for a reset`."""
    parts: list[str] = []
    for d, f in hits:
        gpu = d.gpu if d.gpu.startswith("GPU") else f"GPU {d.gpu}"
        what = f"to free {gpu} on node {d.node} for a reset" if d.gpu else f"to drain node {d.node}"
        text = f"{f.code} says {what}"
        if text not in parts:
            parts.append(text)
    return "; ".join(parts)


def _moved(f: Finding, alt: Alternative, hits: list[tuple[Drain, Finding]]) -> Finding:
    left = ", ".join(sorted({d.node for d, _ in hits}))
    note = f"Not {left}: {_why(hits)}."
    evidence = dict(f.evidence)
    evidence["coherence"] = {
        "moved_from": list(f.targets),
        "moved_to": list(alt.targets),
        "because": [{"code": g.code, "node": d.node, "gpu": d.gpu} for d, g in hits],
    }
    return dataclasses.replace(
        f,
        message=alt.message or f.message,
        recommendation=f"{alt.recommendation} ({note})",
        targets=alt.targets,
        alternatives=tuple(a for a in f.alternatives if a is not alt),
        evidence=evidence,
    )


def _kept(f: Finding, hits: list[tuple[Drain, Finding]]) -> Finding:
    nodes = sorted({d.node for d, _ in hits})
    whole = any(not d.gpu for d, _ in hits)
    place = ", ".join(nodes)
    tried = (
        f"none of the other nodes {f.code} considered is clear either"
        if f.alternatives
        else f"{f.code} found no other node for this work"
    )
    if whole:
        when = f"wait until {place} is back in service before doing this"
    else:
        when = f"let the reset happen before new work lands on {place}"
    note = f" Note: {_why(hits)}, and {tried}: {when}."
    evidence = dict(f.evidence)
    evidence["coherence"] = {
        "kept_target": list(f.targets),
        "because": [{"code": g.code, "node": d.node, "gpu": d.gpu} for d, g in hits],
    }
    return dataclasses.replace(f, recommendation=f.recommendation + note, evidence=evidence)


# ---- rule 4: work placed on a node another finding releases: both say so ----------------


def _agree_on_releases(findings: list[Finding]) -> list[Finding]:
    released: dict[str, list[int]] = {}
    for i, f in enumerate(findings):
        for node in f.releases:
            released.setdefault(node, []).append(i)
    if not released:
        return findings
    out = list(findings)
    users: dict[int, list[tuple[str, Finding]]] = {}
    for i, f in enumerate(findings):
        hits = [(n, j) for n in dict.fromkeys(f.targets) for j in released.get(n, []) if j != i]
        if not hits:
            continue
        out[i] = _uses_released(out[i], [(n, findings[j]) for n, j in hits])
        for n, j in hits:
            users.setdefault(j, []).append((n, f))
    for j, placed in users.items():
        out[j] = _released_in_use(out[j], placed)
    return out


def _noted(f: Finding, note: str, key: str, entries: list[dict[str, str]]) -> Finding:
    """`f` with `note` after its recommendation and `entries` under `key` in its evidence's
    `coherence` (kept beside what rule 1 put there)."""
    evidence = dict(f.evidence)
    coherence = dict(evidence.get("coherence") or {})
    coherence[key] = [*coherence.get(key, []), *entries]
    evidence["coherence"] = coherence
    return dataclasses.replace(f, recommendation=f.recommendation + note, evidence=evidence)


def _uses_released(f: Finding, hits: list[tuple[str, Finding]]) -> Finding:
    """`f` places work on nodes that the findings of `hits` release."""
    said = dict.fromkeys(f"{g.code} advises releasing node {n}" for n, g in hits)
    names = list(dict.fromkeys(n for n, _ in hits))
    nodes = ", ".join(names)
    note = (
        f" Note: {'; '.join(said)}, where this places work, on capacity counted idle there: "
        f"keep the GPUs it needs on {nodes} and release what the work leaves instead "
        f"(released first, {nodes} {'is' if len(names) == 1 else 'are'} no longer there to "
        "use)."
    )
    entries = [{"code": g.code, "node": n, "resource": g.resource.ref()} for n, g in hits]
    return _noted(f, note, "uses_released", entries)


def _released_in_use(f: Finding, placed: list[tuple[str, Finding]]) -> Finding:
    """`f` releases nodes that the findings of `placed` place work on."""
    work = [(n, g, f"{g.resource.kind} {g.resource.ref()}") for n, g in placed]
    said = dict.fromkeys(f"{g.code} places {who} on {n}" for n, g, who in work)
    note = (
        f" Note: {'; '.join(said)}, using GPUs this finding counts idle: keep the GPUs that "
        "work needs and release what it leaves instead, and the rest of the node once nothing "
        "runs there."
    )
    entries = [{"code": g.code, "node": n, "resource": who} for n, g, who in work]
    return _noted(f, note, "released_in_use", entries)


# ---- rule 2: one primary finding per resource ---------------------------------------------


def _resource_key(f: Finding) -> tuple[str, str, str]:
    return (f.resource.kind, f.resource.namespace, f.resource.name)


def _primaries(findings: list[Finding]) -> list[Finding]:
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, f in enumerate(findings):
        groups.setdefault(_resource_key(f), []).append(i)
    out = list(findings)
    for members in groups.values():
        if len(members) < 2:
            continue
        leads: set[Category] = set()
        for i in members:
            f = findings[i]
            others = [findings[j].code for j in members if j != i]
            related = tuple(dict.fromkeys(c for c in others if c != f.code))
            out[i] = dataclasses.replace(f, related=related, primary=f.category not in leads)
            leads.add(f.category)
    return out


# ---- rule 3: every GPU-hour counted once --------------------------------------------------


def _count_once(findings: list[Finding]) -> tuple[list[Finding], Totals]:
    parent = list(range(len(findings)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, f in enumerate(findings):
        for key in sorted(f.overlap_keys()):
            j = owner.setdefault(key, i)
            parent[root(i)] = root(j)
    best: dict[int, int] = {}
    for i, f in enumerate(findings):
        g = root(i)
        b = best.get(g)
        # The largest impact counts; on a tie the first in rank order.
        if b is None or _size(f.impact) > _size(findings[b].impact):
            best[g] = i
    counted = set(best.values())
    out = [
        f if (i in counted) == f.counted else dataclasses.replace(f, counted=i in counted)
        for i, f in enumerate(findings)
    ]
    hours = sum(out[i].impact.gpu_hours for i in sorted(counted))
    cost = sum(out[i].impact.cost for i in sorted(counted))
    return out, Totals(gpu_hours=hours, cost=cost, groups=len(best))


def _size(impact: Impact) -> tuple[float, float]:
    return (round(impact.gpu_hours, 6), round(impact.cost, 6))
