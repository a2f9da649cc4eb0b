"""The capacity plan in the terminal report: a short block per GPU product under the summary,
and the plan's assumptions at the end. Part of the table format (`gpuaudit.report.table`)."""

from __future__ import annotations

from rich.text import Text

from gpuaudit.audit import AuditResult
from gpuaudit.capacity import Stat
from gpuaudit.report.text import num, plural, terminal


def _stat(s: Stat) -> str:
    return f"peak {num(s.peak, 1)}, p95 {num(s.p95, 1)}, mean {num(s.mean, 1)}"


def capacity_text(result: AuditResult) -> Text | None:
    """Per product: GPUs held and busy, and the plan's sentence; a line on the queues; None
    without a plan."""
    plan = result.capacity
    if plan is None or not plan.by_product:
        return None
    t = Text("\nCapacity plan", style="bold")
    t.append(" (GPUs per hour over the window; assumptions below)\n")
    for (product, p), line in zip(plan.by_product.items(), plan.headlines(), strict=True):
        name = terminal(plan.short_names.get(product, product), 60)
        t.append(f"  {name}: ", style="bold")
        t.append(f"held {_stat(p.gpus_held)}; busy {_stat(p.gpus_busy)}\n")
        t.append(f"    {terminal(line, 400)}\n")
    if plan.queues:
        systems = sorted({(u.system, u.kind) for u in plan.queues})
        counts = ", ".join(
            plural(
                len({u.queue for u in plan.queues if (u.system, u.kind) == sk}), f"{sk[0]} {sk[1]}"
            )
            for sk in systems
        )
        t.append(
            f"  Queue quota: {plural(len(plan.queues), 'GPU quota line')} of {counts}; the "
            "Markdown, HTML and JSON reports list their quota, admitted and busy GPU-hours.\n"
        )
    return t


def assumptions_text(result: AuditResult) -> Text | None:
    """The capacity plan's assumptions, numbered; None without a plan."""
    plan = result.capacity
    if plan is None or not plan.by_product:
        return None
    t = Text("Capacity plan assumptions:\n", style="dim")
    for i, a in enumerate(plan.assumptions, 1):
        t.append(f"  {i}. {a}\n", style="dim")
    return t
