"""What last week's findings became, in words every report format shows first: one sentence
with the counts and the realized savings, the fixed findings' rows (how each was judged fixed,
and what it was wasting per week), and the findings open longest. Every text is made harmless
here (`terminal`); Markdown and HTML escape their own way on top."""

from __future__ import annotations

from gpuaudit.audit.assemble import AuditResult
from gpuaudit.audit.outcomes import GONE, SCALED_DOWN
from gpuaudit.report.text import MAX_LISTED, count, money, num, plural, terminal

HOW = {GONE: "gone", SCALED_DOWN: "scaled down"}
"""How a fixed finding was judged fixed, in words (else: no longer matches)."""

FIXED_HEAD = ("Check", "Resource", "How", "GPU-h/week", "Cost/week", "Judged by")
OPEN_HEAD = ("Check", "Resource", "Weeks open", "First seen")
NUMERIC = frozenset({"GPU-h/week", "Cost/week", "Weeks open"})
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


def open_rows(result: AuditResult) -> list[tuple[str, ...]]:
    """The findings open longest (`OPEN_HEAD`), at most `MAX_LISTED`."""
    o = result.outcomes
    if o is None:
        return []
    ranked = sorted(o.still_open, key=lambda f: (-f.weeks, f.fingerprint))
    return [
        (terminal(f.code, 20), terminal(f.resource, 160), str(f.weeks), terminal(f.first_seen, 40))
        for f in ranked[:MAX_LISTED]
    ]


def more(result: AuditResult) -> tuple[int, int]:
    """How many fixed and still-open findings the rows leave out."""
    o = result.outcomes
    if o is None:
        return 0, 0
    return max(0, len(o.fixed) - MAX_LISTED), max(0, len(o.still_open) - MAX_LISTED)


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
