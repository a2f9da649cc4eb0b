"""The showback (`gpuaudit.audit.showback`) as the terminal, Markdown and HTML reports give it:
one sentence for the terminal's header, and per grouping (namespace, label) a table of the top
groups by cost on both bases with their idle share. Shared by those renderers, as
`gpuaudit.report.text` is; the figures are the audit's exact decimals, summed per group over its
products (the rows of a table add up to the cluster's cost: the groups not listed are one row,
the remainders the rule left unshared one row each)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from gpuaudit.audit.assemble import AuditResult
from gpuaudit.audit.showback import IDLE, UNALLOCATED, Grouping
from gpuaudit.report.text import num, pct, terminal

TOP_GROUPS = 10
"""Groups listed by name in a showback table; the rest are one row."""
RULE_WORDS = {
    "none": "idle and unallocated cost on lines of their own",
    "proportional": "idle and unallocated cost shared in proportion to allocated GPU-hours",
    "even": "idle and unallocated cost shared evenly among the groups that held each product",
}
"""`--idle-rule` in words."""


@dataclass(frozen=True)
class ShowbackRow:
    """One row of a showback table, as text (untrusted names made harmless)."""

    group: str
    allocated_gpu_hours: str
    idle_share: str
    """Idle GPU-hours over allocated GPU-hours."""
    allocation_basis: str
    usage_basis: str


@dataclass(frozen=True)
class ShowbackTable:
    """The table of one grouping."""

    by: str
    """`namespace` or the label's name, as text."""
    rows: tuple[ShowbackRow, ...]
    total: ShowbackRow


def _row(name: str, alloc: Decimal, idle: Decimal, a: Decimal, u: Decimal) -> ShowbackRow:
    share = float(idle / alloc) if alloc > 0 else None
    return ShowbackRow(
        terminal(name, 80), num(float(alloc), 2), pct(share), num(float(a), 2), num(float(u), 2)
    )


def _table(g: Grouping) -> ShowbackTable:
    sums: dict[str, list[Decimal]] = {}
    for ln in g.lines:
        s = sums.setdefault(ln.group, [Decimal(0)] * 4)
        figures = (ln.allocated_gpu_hours, ln.idle_gpu_hours)
        costs = (ln.allocation_basis_cost, ln.usage_basis_cost)
        for i, v in enumerate(figures + costs):
            s[i] += v
    remainder = [k for k in (UNALLOCATED, IDLE) if k in sums]
    holders = sorted((k for k in sums if k not in remainder), key=lambda k: (-sums[k][2], k))
    rows = [_row(k, *sums[k]) for k in holders[:TOP_GROUPS]]
    rest = holders[TOP_GROUPS:]
    if rest:
        total_rest = [sum((sums[k][i] for k in rest), Decimal(0)) for i in range(4)]
        rows.append(_row(f"{len(rest)} other groups", *total_rest))
    rows += [_row(k, *sums[k]) for k in remainder]
    total = [sum((s[i] for s in sums.values()), Decimal(0)) for i in range(4)]
    by = g.by.removeprefix("label:") if g.by.startswith("label:") else g.by
    return ShowbackTable(terminal(by, 60), tuple(rows), _row("total", *total))


def showback_tables(result: AuditResult) -> tuple[ShowbackTable, ...]:
    """One table per grouping by namespace, then by the `--group-by-label` label; the grouping
    by owner is left to the JSON and CSV reports (and `--per-owner`), to keep the page short."""
    sb = result.showback
    if sb is None or not any(g.lines for g in sb.groupings):
        return ()
    return tuple(_table(g) for g in sb.groupings if g.by != "owner")


def showback_rule(result: AuditResult) -> str:
    """The idle rule, named and in words: `none (idle and unallocated cost on lines of their
    own)`."""
    sb = result.showback
    if sb is None:
        return ""
    return f"{sb.idle_rule} ({RULE_WORDS[sb.idle_rule]})"


def showback_sentence(result: AuditResult) -> str:
    """The showback in one line: `Showback (idle rule none): GPU cost 1,000.00 USD = allocated
    800.00 USD (used 600.00 USD, idle 200.00 USD) + unallocated 200.00 USD.`"""
    sb = result.showback
    if sb is None or not sb.products:
        return ""
    cur = sb.currency

    def m(x: Decimal) -> str:
        return f"{num(float(x), 2)} {cur}"

    cluster, allocated = sb.total("capacity_cost"), sb.total("allocated_cost")
    return (
        f"Showback (idle rule {sb.idle_rule}): GPU cost {m(cluster)} = allocated "
        f"{m(allocated)} (used {m(sb.total('used_cost'))}, idle {m(sb.total('idle_cost'))}) "
        f"+ unallocated {m(cluster - allocated)}."
    )


@dataclass(frozen=True)
class ShowbackView:
    """What the HTML report's showback section shows."""

    rule: str
    sentence: str
    tables: tuple[ShowbackTable, ...]
    notes: tuple[str, ...]


def showback_view(result: AuditResult) -> ShowbackView | None:
    """The showback section of the HTML report; None without a showback."""
    tables = showback_tables(result)
    if not tables or result.showback is None:
        return None
    return ShowbackView(
        terminal(showback_rule(result), 200),
        terminal(showback_sentence(result), 400),
        tables,
        tuple(terminal(n, 400) for n in result.showback.notes),
    )
