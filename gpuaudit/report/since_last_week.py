"""What last week's findings became, in words every report format shows first: one sentence
with the counts and the realized savings, the fixed findings' rows (how each was judged fixed,
and what it was wasting per week), and the findings open longest. Every text is made harmless
here (`terminal`); Markdown and HTML escape their own way on top."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from gpuaudit.audit.assemble import AuditResult
from gpuaudit.audit.outcomes import GONE, SCALED_DOWN
from gpuaudit.report.text import MAX_LISTED, count, money, num, plural, terminal

HOW = {GONE: "gone", SCALED_DOWN: "scaled down"}
"""How a fixed finding was judged fixed, in words (else: no longer matches)."""

FIXED_HEAD = ("Check", "Resource", "How", "GPU-h/week", "Cost/week", "Judged by")
OPEN_HEAD = ("Check", "Resource", "Weeks open", "First seen")
WEEKS_HEAD = (
    "Week ending",
    "Allocated GPU-h",
    "Idle GPU-h",
    "Wasted cost",
    "Findings open",
    "Fixed",
    "Saved GPU-h/week",
    "Saved cost/week",
)
"""The columns of the trend over the kept weeks (`--history`)."""
NUMERIC = frozenset({"GPU-h/week", "Cost/week", "Weeks open", *WEEKS_HEAD[1:]})
"""The columns that hold numbers (aligned right)."""


def sentence(result: AuditResult) -> str:
    """`Since w0.json (to 2026-11-08T00:00:00Z): 3 fixed, saving 120.5 GPU-hours and 1,265 USD a
    week; 70 still open (the oldest for 5 weeks); 3 new; 1 waived now.`; empty without
    `--previous` or `--history`."""
    o, c = result.outcomes, result.comparison
    if o is None or c is None:
        return ""
    s = o.savings
    to = f" (to {terminal(o.previous_window_end, 40)})" if o.previous_window_end else ""
    cost = "" if s.cost is None else f" and {money(s.cost, terminal(s.currency, 10))}"
    saving = f", saving {num(s.gpu_hours, 1)} GPU-hours{cost} a week" if o.fixed else ""
    oldest = max((f.weeks for f in o.still_open), default=0)
    still = f"{count(len(o.still_open))} still open"
    if oldest:
        still += f" (the oldest for {oldest} weeks)"
    parts = [f"{count(len(o.fixed))} fixed{saving}", still, f"{count(len(o.new))} new"]
    if o.waived:
        parts.append(f"{count(len(o.waived))} waived now")
    if o.unverified:
        parts.append(f"{plural(len(o.unverified), 'finding')} not verified (its check did not run)")
    return f"Since {terminal(c.source, 80)}{to}: {'; '.join(parts)}."


def fixed_rows(result: AuditResult) -> list[tuple[str, ...]]:
    """One row per fixed finding (`FIXED_HEAD`), the largest weekly waste first; at most
    `MAX_LISTED`."""
    o = result.outcomes
    if o is None:
        return []
    cur = terminal(o.savings.currency, 10)
    ranked = sorted(o.fixed, key=lambda f: (-(f.gpu_hours_per_week or 0.0), f.fingerprint))
    rows: list[tuple[str, ...]] = []
    for f in ranked[:MAX_LISTED]:
        hours = "n/a" if f.gpu_hours_per_week is None else num(f.gpu_hours_per_week, 1)
        cost = "n/a" if f.cost_per_week is None else money(f.cost_per_week, cur)
        if not f.counted:
            hours += " (not counted)"
        rows.append(
            (
                terminal(f.code, 20),
                terminal(f.resource, 160),
                HOW.get(f.how, "no longer matches"),
                hours,
                cost,
                terminal(f.why, 400),
            )
        )
    return rows


MAX_OPEN = 10
"""Still-open findings listed by name (the oldest first); the JSON report lists them all."""


def open_rows(result: AuditResult) -> list[tuple[str, ...]]:
    """The findings open longest (`OPEN_HEAD`), at most `MAX_OPEN`."""
    o = result.outcomes
    if o is None:
        return []
    ranked = sorted(o.still_open, key=lambda f: (-f.weeks, f.fingerprint))
    return [
        (terminal(f.code, 20), terminal(f.resource, 160), str(f.weeks), terminal(f.first_seen, 40))
        for f in ranked[:MAX_OPEN]
    ]


def more(result: AuditResult) -> tuple[int, int]:
    """How many fixed and still-open findings the rows leave out."""
    o = result.outcomes
    if o is None:
        return 0, 0
    return max(0, len(o.fixed) - MAX_LISTED), max(0, len(o.still_open) - MAX_OPEN)


def view(result: AuditResult) -> dict[str, object] | None:
    """What the HTML report's section shows (`parts/since.html.j2`); None without one."""
    said = sentence(result)
    if not said:
        return None
    hidden = more(result)
    tables = [
        {"title": title, "head": head, "rows": rows, "more": left}
        for title, head, rows, left in (
            ("Fixed", FIXED_HEAD, fixed_rows(result), hidden[0]),
            ("Open longest", OPEN_HEAD, open_rows(result), hidden[1]),
        )
        if rows
    ]
    return {"sentence": said, "tables": tables, "numeric": NUMERIC}


def week_rows(result: AuditResult) -> list[tuple[str, ...]]:
    """One row per kept week, oldest first (`WEEKS_HEAD`); a figure a report lacks is `n/a`."""

    def fig(x: float | None, digits: int = 0) -> str:
        return "n/a" if x is None else num(x, digits)

    def whole(n: int | None) -> str:
        return "n/a" if n is None else count(n)

    rows: list[tuple[str, ...]] = []
    for w in result.weeks:
        cur = terminal(w.currency, 10)
        rows.append(
            (
                datetime.fromtimestamp(w.end, timezone.utc).strftime("%Y-%m-%d %H:%M"),
                fig(w.allocated_gpu_hours),
                fig(w.idle_gpu_hours),
                "n/a" if w.wasted_cost is None else money(w.wasted_cost, cur),
                whole(w.findings_open),
                whole(w.findings_fixed),
                fig(w.saved_gpu_hours, 1),
                "n/a" if w.saved_cost is None else money(w.saved_cost, cur),
            )
        )
    return rows


@dataclass(frozen=True)
class WeeksView:
    """What the HTML report's trend over the kept weeks shows (`parts/weeks.html.j2`): a chart
    of the figures, and the same as a table (printable, and what a reader without the chart
    reads)."""

    title: str
    labels: list[str]
    gpu_hours: list[tuple[str, list[float | None]]]
    findings: list[tuple[str, list[int | None]]]
    rows: list[tuple[str, ...]]
    head: tuple[str, ...] = WEEKS_HEAD
    numeric: frozenset[str] = NUMERIC
    svg: object = ""
    """The chart, drawn by the HTML report."""


def weeks_view(result: AuditResult) -> WeeksView | None:
    """The trend over the kept weeks for the HTML report; None without `--history`."""
    rows = week_rows(result)
    if not rows:
        return None
    weeks = result.weeks
    return WeeksView(
        title=f"The last {plural(len(rows), 'week')}",
        labels=[row[0][:10] for row in rows],
        gpu_hours=[
            ("Allocated GPU-hours", [w.allocated_gpu_hours for w in weeks]),
            ("Idle GPU-hours", [w.idle_gpu_hours for w in weeks]),
            ("Realized savings, GPU-hours a week", [w.saved_gpu_hours for w in weeks]),
        ],
        findings=[
            ("Findings open", [w.findings_open for w in weeks]),
            ("Fixed since the week before", [w.findings_fixed for w in weeks]),
        ],
        rows=rows,
    )
