"""The terminal report: a short fleet summary over a ranked table of findings."""

from __future__ import annotations

import io

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from gpuaudit.audit import AuditResult
from gpuaudit.capacity import Stat
from gpuaudit.report.interface import ReportFormat
from gpuaudit.report.text import money, num, pct, plural, terminal, window_bounds


def summary_text(result: AuditResult) -> Text:
    s = result.summary
    t = Text()
    cluster = terminal(result.cluster) or "cluster"
    t.append(f"gpuaudit: {cluster}", style="bold")
    t.append(f"  window {num(s.window_hours, grouped=False)} h ending {window_bounds(result)[1]}\n")
    t.append(f"GPUs {s.gpus_total}", style="bold")
    t.append(
        f"   allocated now {num(s.gpus_allocated_now, 1, grouped=False)}, on average "
        f"{num(s.gpus_allocated_avg, 1, grouped=False)} ({pct(s.allocation_rate)})"
    )
    t.append(f"   mean engine activity {pct(s.mean_activity)}\n")
    t.append(
        f"idle GPU-hours {num(s.idle_gpu_hours)} of {num(s.allocated_gpu_hours)} allocated"
        f"   wasted {money(s.wasted_cost, s.currency)}"
    )
    if not result.complete:
        t.append("\nINCOMPLETE: ", style="bold red")
        t.append(terminal("; ".join(result.incomplete_reasons) or "some data is missing"))
    return t


def findings_table(result: AuditResult) -> Table:
    cur = result.summary.currency
    table = Table(
        box=box.SIMPLE_HEAD,
        expand=True,
        pad_edge=False,
        title=f"{len(result.findings)} findings, worst first",
    )
    table.add_column("#", justify="right", style="dim", no_wrap=True)
    table.add_column("Severity", no_wrap=True)
    table.add_column("Code", no_wrap=True)
    table.add_column("Resource", overflow="fold", ratio=2, min_width=22)
    table.add_column("GPU-h", justify="right", no_wrap=True)
    table.add_column(cur, justify="right", no_wrap=True)
    table.add_column("Finding and recommendation", overflow="fold", ratio=3, min_width=30)
    for i, f in enumerate(result.findings, 1):
        sev = f.severity
        body = Text(terminal(f.message, 400))
        body.append("\n-> ", style="bold green")
        body.append(terminal(f.recommendation, 400), style="green")
        table.add_row(
            str(i),
            Text(sev.value, style=sev.colour),
            Text(f.code, style="bold"),
            Text(terminal(f.resource.ref())),
            Text(num(f.impact.gpu_hours, 1)),
            Text(num(f.impact.cost)),
            body,
        )
    return table


def renderable(result: AuditResult) -> RenderableType:
    """The summary, the findings table, skipped checks and warnings, for a Rich console."""
    parts: list[RenderableType] = [summary_text(result)]
    capacity = capacity_text(result)
    if capacity is not None:
        parts.append(capacity)
    if result.findings:
        parts.append(findings_table(result))
    else:
        parts.append(Text("\nNo findings.", style="green"))
    if result.skipped:
        sk = Text("\nSkipped checks:\n", style="yellow")
        for s in result.skipped:
            sk.append(f"  {s.code}: {terminal(s.reason)}\n")
        parts.append(sk)
    if result.warnings:
        w = Text("Warnings:\n", style="yellow")
        for msg in result.warnings:
            w.append(f"  {terminal(msg, 400)}\n")
        parts.append(w)
    assumptions = assumptions_text(result)
    if assumptions is not None:
        parts.append(assumptions)
    return Group(*parts)


def print_table(result: AuditResult, console: Console) -> None:
    """Print the report to `console`, in its width and colours."""
    console.print(renderable(result))


def table_text(result: AuditResult, width: int = 160) -> str:
    """The report as plain text `width` columns wide, without colour or terminal codes: what
    `--output` writes for the table format."""
    buf = io.StringIO()
    print_table(result, Console(file=buf, width=width, no_color=True, force_terminal=False))
    return buf.getvalue()


# ---- the capacity plan: a block under the summary, its assumptions at the end -----------------


def _capacity_stat(s: Stat) -> str:
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
        t.append(f"held {_capacity_stat(p.gpus_held)}; busy {_capacity_stat(p.gpus_busy)}\n")
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


FORMAT = ReportFormat("table", table_text)
