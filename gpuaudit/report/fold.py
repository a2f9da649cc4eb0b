"""Similar findings folded into one row: thirteen nightly batch Deployments that all hold an L40S
around the clock for a three-hour job are one problem with one fix, not thirteen rows.

Findings are alike when they share the check, the list (risks or waste), the severity, the
confidence (a low-confidence idle finding is not folded under confident ones), the kind of
resource, the namespace and the recommendation once the names of their own objects and their
own GPU-hour figures are taken out of it (`Replace Deployment batch/* with a CronJob scheduled
`0 1 * * *` ...`): the same fix for the same kind of thing in the same place. A fold holds
`FOLD_MIN` findings or more; its row sits where its first (highest-ranked) finding is, and its
figures are the sums of its findings' (so a fold of many small findings can show more
GPU-hours than the rows above it: the rank is its first finding's). Critical findings never
fold: each is its own urgent action. Folding changes neither the findings nor their order;
`--all` shows every one. The terminal and HTML reports fold; JSON lists every finding.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from gpuaudit.checks.findings import Finding, Severity

FOLD_MIN = 3
"""The fewest alike findings that fold into one row."""

_FIGURE = re.compile(r"\d[\d,]*(?:\.\d+)? GPU-hours")


@dataclass(frozen=True)
class Row:
    """One row of the findings table: one finding, or a fold of alike ones."""

    findings: tuple[Finding, ...]
    """The finding, or the alike findings in rank order."""
    rank: int
    """The rank (from 1) of the first finding in the audit's order."""

    @property
    def first(self) -> Finding:
        return self.findings[0]

    @property
    def folded(self) -> bool:
        return len(self.findings) > 1

    @property
    def gpu_hours(self) -> float:
        return sum(f.impact.gpu_hours for f in self.findings)

    @property
    def cost(self) -> float:
        return sum(f.impact.cost for f in self.findings)

    def pattern(self) -> str:
        """What the row is about: `ns/name` of one finding; for a fold, the namespace and the
        names' common start (`batch/report-batch-*`, `batch/*`)."""
        first = self.first.resource
        if not self.folded:
            return first.ref()
        stem = _common_stem([f.resource.name for f in self.findings])
        name = f"{stem}*" if stem else "*"
        return f"{first.namespace}/{name}" if first.namespace else name


def fold(findings: Sequence[Finding], every: bool = False) -> tuple[Row, ...]:
    """The table's rows, in the findings' order: alike findings folded (unless `every`)."""
    if every:
        return tuple(Row((f,), i) for i, f in enumerate(findings, 1))
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, f in enumerate(findings):
        groups.setdefault(likeness(f), []).append(i)
    rows: list[Row] = []
    placed: set[int] = set()
    for i, f in enumerate(findings):
        if i in placed:
            continue
        members = groups[likeness(f)]
        if len(members) < FOLD_MIN or f.severity is Severity.CRITICAL:
            rows.append(Row((f,), i + 1))
            continue
        placed.update(members)
        rows.append(Row(tuple(findings[j] for j in members), i + 1))
    return tuple(rows)


def likeness(f: Finding) -> tuple[str, ...]:
    """What alike findings share: check, list, severity, confidence, resource kind, namespace,
    and the recommendation without the finding's own names and GPU-hour figures."""
    r = f.resource
    text = f.recommendation
    names = {r.name, r.node, _owner_name(f)} - {""}
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, "<name>")
    if r.namespace:
        text = re.sub(re.escape(r.namespace) + r"/[\w.\-]+", f"{r.namespace}/<name>", text)
    text = _FIGURE.sub("<figure>", text)
    confidence = f.confidence.value if f.confidence else ""
    return (f.code, f.category.value, f.severity.value, confidence, r.kind, r.namespace, text)


def _owner_name(f: Finding) -> str:
    owner = f.evidence.get("owner") if hasattr(f.evidence, "get") else None
    return str(owner).rpartition("/")[2] if owner else ""


def _common_stem(names: Sequence[str]) -> str:
    """The names' common start, cut back to just after a `-`, `.` or `_` so that it ends
    where a name's parts do (`report-batch-` of `report-batch-002-0-x` and
    `report-batch-011-3-y`); empty when that leaves fewer than three characters."""
    stem = os.path.commonprefix(list(names))
    if len(stem) < min(len(n) for n in names):
        cut = max(stem.rfind(c) for c in "-._")
        stem = stem[: cut + 1] if cut >= 0 else ""
    return stem if len(stem) >= 3 else ""
