"""The Markdown report, for pasting into a ticket or a chat, and the short chat summary that
`--webhook` posts.

Every string that came from the cluster (names, labels, messages that quote them, the cluster
name, even an earlier report read for the trend) goes through `md()`, so a name cannot open a
table cell, a link, an image, emphasis, a code span or an HTML tag. Findings appear in the one
ranked order the audit computed (the risks, most urgent first, then the waste, the most wasted
GPU-hours first; `gpuaudit.checks.findings.rank`), in a table for each list; nothing is
re-sorted here.
"""

from __future__ import annotations

import re

from gpuaudit import __version__
from gpuaudit.audit.assemble import AuditResult
from gpuaudit.audit.breakdown import Group
from gpuaudit.audit.capacity import CapacityPlan
from gpuaudit.audit.compare import IMPROVED, NEW, UNCHANGED, WORSE
from gpuaudit.checks.findings import ORDER_RULE, Finding, lists
from gpuaudit.inventory.queue_usage import QueueUsage
from gpuaudit.report import since_last_week
from gpuaudit.report.renderer import ReportFormat
from gpuaudit.report.showback_text import showback_rule, showback_sentence, showback_tables
from gpuaudit.report.text import (
    CLUSTER_HEAD,
    DELTA_LABELS,
    MAX_LISTED,
    attribution_rows,
    cause_rows,
    cluster_rows,
    count,
    delta_text,
    fix_note,
    fix_rows,
    hours_text,
    money,
    num,
    owner_text,
    pct,
    plural,
    release_rows,
    resolved_fields,
    stat_text,
    terminal,
    value_text,
    window_text,
)

MAX_FINDINGS = 50
"""Findings listed in the full report; the JSON report always has them all."""
MAX_GROUPS = 25
"""Rows of each waste table."""
SUMMARY_TOP = 5
"""Waste findings the chat summary names."""
SUMMARY_RISKS = 3
"""Risk findings the chat summary names, before the waste."""
SUMMARY_LIMIT = 3000
"""Characters of the chat summary; Slack shows about this much before folding."""

# Characters that start Markdown syntax anywhere in a line (emphasis, code spans, links and
# images, table cells, strikethrough, GitHub math, issue references and @-mentions), plus the
# backslash itself so the escapes stay literal. Parentheses need none: with `[` and `]`
# escaped no link can form around them.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~$#@])")
# Autolinks (GitHub links bare `www.` and `scheme://` text): break them with an escape.
_AUTOLINK = re.compile(r"(?i)(www)\.|:(?=//)")


def md(text: object, limit: int = 200) -> str:
    """Untrusted text as literal Markdown: control characters shown as visible escapes (as in
    the terminal), long text cut, and every character that could start Markdown or HTML
    escaped. Safe inside table cells and list items."""
    out = terminal(str(text), limit)
    out = _MD_SPECIAL.sub(r"\\\1", out)
    out = out.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _AUTOLINK.sub(lambda m: f"{m.group(1)}\\." if m.group(1) else "\\:", out)


def code(text: str) -> str:
    """A check code in a code span, where escapes would show; anything odd as plain text."""
    return f"`{text}`" if text.isascii() and text.isalnum() and len(text) <= 20 else md(text, 20)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _title(result: AuditResult) -> list[str]:
    cluster = md(result.cluster or "cluster", 120)
    return [
        f"# GPU audit: {cluster}",
        "",
        f"Window {window_text(result)}. Generated {result.generated_at} by gpuaudit "
        f"{md(__version__, 40)}.",
    ]


def _incomplete(result: AuditResult) -> list[str]:
    if result.complete:
        return []
    lines = [
        "",
        "> **INCOMPLETE:** some sources answered only in part, so the figures below may "
        "understate the waste:",
    ]
    reasons = result.incomplete_reasons or ("some data is missing",)
    lines += [f"> - {md(r, 400)}" for r in reasons]
    return lines


def _summary(result: AuditResult) -> list[str]:
    s = result.summary
    cur = md(s.currency, 10)
    return [
        "",
        "## Fleet summary",
        "",
        "| Figure | Value |",
        "|---|---:|",
        f"| GPUs | {count(s.gpus_total)} |",
        f"| Allocated now | {num(s.gpus_allocated_now, 1)} |",
        f"| Allocated on average | {num(s.gpus_allocated_avg, 1)} ({pct(s.allocation_rate)}) |",
        f"| Mean engine activity of allocated GPUs | {pct(s.mean_activity)} |",
        f"| Allocated GPU-hours | {num(s.allocated_gpu_hours)} |",
        f"| Idle GPU-hours | {num(s.idle_gpu_hours)} |",
        f"| Wasted cost | {money(s.wasted_cost, cur)} |",
        *_attribution(result),
        *_causes(result),
    ]


def _attribution(result: AuditResult) -> list[str]:
    """The attribution ledger: allocated GPU-hours by method, unattributed by reason."""
    rows = attribution_rows(result)
    if not rows:
        return []
    out = [
        "",
        "### Attribution of allocated GPU-hours",
        "",
        "| Attribution | How or why | GPU-hours | Pods |",
        "|---|---|---:|---:|",
    ]
    for side, words, value, pods in rows:
        out.append(_row([side, words, hours_text(value), "" if pods is None else count(pods)]))
    if result.attribution is not None and result.attribution.unknown:
        out += ["", f"Unattributed GPU-hours are unknown: {md(result.attribution.unknown, 300)}."]
    return out


def _causes(result: AuditResult) -> list[str]:
    """The ledger by cause: every held GPU-hour by cause, and the effective GPUs."""
    rows = cause_rows(result)
    book = result.causes
    if not rows or book is None:
        return []
    out = [
        "",
        "### Held GPU-hours by cause",
        "",
        f"Effective GPUs {num(book.effective_gpus, 1)} of {num(book.allocated_gpus, 1)} "
        "allocated (productive and allocated GPU-hours over the window's hours).",
        "",
        "| Cause | GPU-hours | Share |",
        "|---|---:|---:|",
    ]
    out += [_row([words, hours_text(v), pct(share)]) for _, words, v, share in rows]
    for cause, why in sorted(book.not_measured.items()):
        out += ["", f"Not measured: {cause}: {md(why, 300)}."]
    return out


def _clusters(result: AuditResult) -> list[str]:
    """A scan of every cluster: a row per cluster, then the fleet total (their sums)."""
    rows = cluster_rows(result)
    if not rows:
        return []
    cur = md(result.summary.currency, 10)
    head = [*CLUSTER_HEAD[:6], f"Wasted ({cur})", *CLUSTER_HEAD[7:]]
    lines = [
        "",
        f"## Clusters (by {md(result.cluster_label, 60)})",
        "",
        _row(head),
        "|---|" + "---:|" * (len(head) - 1),
    ]
    for i, (name, *cells) in enumerate(rows):
        first = "**fleet total**" if i == len(rows) - 1 else md(name, 80)
        cells[5] = cells[5].removesuffix(f" {result.summary.currency}")
        lines.append(_row([first, *cells]))
    return lines


def _since(result: AuditResult) -> list[str]:
    """What last week's findings became (`--previous`, `--history`), first in the report."""
    said = since_last_week.sentence(result)
    if not said:
        return []
    lines = ["", "## Since last week", "", md(said, 600)]
    for title, head, rows, left in (
        ("Fixed", since_last_week.FIXED_HEAD, since_last_week.fixed_rows(result), 0),
        ("Open longest", since_last_week.OPEN_HEAD, since_last_week.open_rows(result), 1),
    ):
        if not rows:
            continue
        lines += ["", f"{title}:", "", *_since_table(head, rows)]
        hidden = since_last_week.more(result)[left]
        if hidden:
            lines.append(f"\n…and {hidden} more in the JSON report.")
    return lines


def _weeks(result: AuditResult) -> list[str]:
    """The trend over the weeks `--history` keeps, oldest first."""
    rows = since_last_week.week_rows(result)
    if not rows:
        return []
    head = since_last_week.WEEKS_HEAD
    return ["", f"## The last {plural(len(rows), 'week')}", "", *_since_table(head, rows)]


def _since_table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """A table of `since_last_week`'s, its numbers aligned right."""
    rule = ["---:" if h in since_last_week.NUMERIC else "---" for h in head]
    return [_row(list(head)), _row(rule), *(_row([md(c, 400) for c in row]) for row in rows)]


def _trend(result: AuditResult) -> list[str]:
    c = result.comparison
    if c is None:
        return []
    cur = result.summary.currency
    when = f", generated {md(c.previous_generated_at, 40)}" if c.previous_generated_at else ""
    lines = [
        "",
        f"## Trend since {md(c.source, 80)}{when}",
        "",
        f"**{c.count(NEW)}** new, **{c.count(WORSE)}** worse, **{c.count(IMPROVED)}** improved, "
        f"{c.count(UNCHANGED)} unchanged, **{len(c.resolved)}** resolved.",
        "",
        "| Figure | Before | Now | Change |",
        "|---|---:|---:|---:|",
    ]
    for key, label in DELTA_LABELS.items():
        d = c.summary_delta.get(key)
        if d is None:
            continue
        lines.append(
            _row(
                [
                    label,
                    value_text(key, d.get("before"), md(cur, 10)),
                    value_text(key, d.get("now"), md(cur, 10)),
                    delta_text(key, d.get("change"), md(cur, 10)),
                ]
            )
        )
    if c.resolved:
        lines += [
            "",
            f"Resolved since then ({len(c.resolved)}):",
            "",
            "| Code | Severity | Resource | GPU-h then |",
            "|---|---|---|---:|",
        ]
        for item in c.resolved[:MAX_LISTED]:
            code, sev, ref, gh = resolved_fields(item)
            hours = "n/a" if gh is None else num(gh, 1)
            lines.append(_row([md(code, 20), md(sev, 20), md(ref, 120), hours]))
        if len(c.resolved) > MAX_LISTED:
            lines.append(f"\n…and {len(c.resolved) - MAX_LISTED} more in the JSON report.")
    return lines


def _finding_cells(result: AuditResult, i: int, f: Finding) -> list[str]:
    sev = f.severity.value
    sev = f"**{sev}**" if f.severity.rank >= 4 else sev
    # The other findings on the same resource: their codes beside this one's, their text after.
    also = result.related_to(f)
    codes = " ".join([code(f.code), *(f"+{code(g.code)}" for g in also)])
    message = " ".join(
        [md(f.message, 400), *(f"{code(g.code)}: {md(g.message, 300)}" for g in also)]
    )
    rec = " ".join(
        [md(f.recommendation, 400), *(f"{code(g.code)}: {md(g.recommendation, 300)}" for g in also)]
    )
    name, contact = owner_text([f.owner])
    owner = md(name, 80) + (f" ({md(contact, 120)})" if contact else "")
    cells = [
        str(i),
        sev,
        codes,
        md(f.resource.ref(), 120),
        owner,
        num(f.impact.gpu_hours, 1),
        num(f.impact.cost),
        message,
        rec,
    ]
    if result.comparison is not None:
        cells.append(result.status_of(f) or "n/a")
    return cells


def _findings(result: AuditResult) -> list[str]:
    n = len(result.findings)
    if not n:
        return ["", "## Findings", "", "No findings."]
    risks, waste = lists(result.primaries)
    head = ["#", "Severity", "Code", "Resource", "Owner", "GPU-h", md(result.summary.currency, 10)]
    head += ["Finding", "Recommendation"]
    align = ["---:", "---", "---", "---", "---", "---:", "---:", "---", "---"]
    if result.comparison is not None:
        head.append("Trend")
        align.append("---")
    lines = [
        "",
        f"## Findings ({n}, {ORDER_RULE})",
        "",
        "The risks first, most urgent first (severity, then the GPU-hours at risk): fixing them "
        "prevents failures or makes GPUs auditable rather than saving GPU-hours. Then the "
        "waste, ranked by wasted GPU-hours over the window, then cost, then severity. "
        "`gpuaudit explain CODE` describes each check. Several findings on one resource share "
        "a row (+CODE). Together they count "
        f"{num(result.summary.findings_gpu_hours)} GPU-hours, none twice.",
    ]
    left = MAX_FINDINGS
    rank = 1
    every = lists(result.findings)
    for title, part, found in (("Risks", risks, every[0]), ("Waste", waste, every[1])):
        if not part:
            continue
        shown = part[: max(left, 0)]
        counts = f"{plural(len(found), 'finding')} on {plural(len(part), 'resource')}"
        lines += ["", f"### {title} ({counts})", ""]
        if shown:
            lines += [_row(head), _row(align)]
            lines += [_row(_finding_cells(result, rank + i, f)) for i, f in enumerate(shown)]
        if len(part) > len(shown):
            lines += [
                "",
                f"The first {len(shown)} of {len(part)} resources of this list; the JSON report "
                "lists them all.",
            ]
        left -= len(shown)
        rank += len(part)
    return lines


def _group_table(title: str, key_name: str, groups: tuple[Group, ...], cur: str) -> list[str]:
    if not groups:
        return []
    lines = [
        "",
        f"## {title}",
        "",
        _row(
            [key_name, "Allocated GPU-h", "Idle GPU-h", "Idle share", f"Wasted {cur}", "Activity"]
        ),
        "|---|---:|---:|---:|---:|---:|",
    ]
    for g in groups[:MAX_GROUPS]:
        share = g.idle_gpu_hours / g.allocated_gpu_hours if g.allocated_gpu_hours > 0 else None
        lines.append(
            _row(
                [
                    md(g.key, 80),
                    num(g.allocated_gpu_hours),
                    num(g.idle_gpu_hours),
                    pct(share),
                    num(g.wasted_cost),
                    pct(g.mean_activity),
                ]
            )
        )
    if len(groups) > MAX_GROUPS:
        lines += ["", f"The first {MAX_GROUPS} of {len(groups)}; the JSON report lists them all."]
    return lines


def _breakdown(result: AuditResult) -> list[str]:
    b = result.breakdown
    if b is None:
        return []
    cur = md(result.summary.currency, 10)
    lines = _group_table("Waste by namespace", "Namespace", b.by_namespace, cur)
    if b.group_label:
        label = md(b.group_label, 60)
        lines += _group_table(f"Waste by label {label}", label, b.by_group, cur)
    return lines


def _showback(result: AuditResult) -> list[str]:
    """The showback: a sentence, the idle rule, and per grouping the top groups by cost on
    both bases with their idle share (the rows add up to the cluster's GPU cost)."""
    tables = showback_tables(result)
    if not tables:
        return []
    lines = ["", "## Showback", "", md(showback_sentence(result), 400), ""]
    lines.append(
        f"Idle rule: {md(showback_rule(result), 200)}. Allocation basis: GPU-hours held at the "
        "product's price plus the share of unallocated capacity; usage basis: GPU-hours used "
        "plus the shares of idle and unallocated cost."
    )
    for t in tables:
        head = [md(t.by, 60), "Allocated GPU-hours", "Idle share", "Allocation basis"]
        lines += ["", _row([*head, "Usage basis"]), "|---|---:|---:|---:|---:|"]
        for r in (*t.rows, t.total):
            figures = [r.allocated_gpu_hours, r.idle_share, r.allocation_basis, r.usage_basis]
            lines.append(_row([md(r.group, 80), *figures]))
    notes = result.showback.notes if result.showback else ()
    lines += [f"\n{md(n, 400)}" for n in notes]
    return lines


def _capacity(result: AuditResult) -> list[str]:
    """The capacity plan: a sentence and a row per GPU product, the queues, the assumptions."""
    plan = result.capacity
    if plan is None or not plan.by_product:
        return []
    lines = ["", "## Capacity plan", ""]
    lines += [f"- {md(h, 600)}" for h in (*plan.headlines(), *plan.notes)]
    hint = plan.what_if_hint()
    if hint:
        lines += ["", md(hint, 300)]
    lines += [
        "",
        "GPUs per hour over the window: peak / p95 / mean. Fewest nodes: the peak hour's "
        "holdings packed first fit decreasing onto the nodes that admit them. Unknown "
        "activity: held GPUs without DCGM series or activity samples (neither busy nor idle).",
        "",
        _row(
            ["Product", "Nodes", "Cordoned", "Ran GPU pods", "Fewest at peak"]
            + ["GPUs held", "GPUs busy", "Unknown activity"]
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for product, p in plan.by_product.items():
        lines.append(
            _row(
                [
                    md(plan.short_names.get(product, product), 80),
                    count(p.nodes),
                    count(p.nodes_cordoned),
                    count(p.nodes_ran_gpu_pods),
                    count(p.min_nodes_at_peak),
                    stat_text(p.gpus_held),
                    stat_text(p.gpus_busy),
                    stat_text(p.gpus_activity_unknown),
                ]
            )
        )
    if plan.release_idle:
        lines += _after_release(plan)
    lines += _queue_table(result)
    lines += ["", "Assumptions:", ""]
    lines += [f"{i}. {md(a, 800)}" for i, a in enumerate(plan.assumptions, 1)]
    return lines


def _after_release(plan: CapacityPlan) -> list[str]:
    """`--what-if release-idle`: per product, the plan after releasing the idle reservations."""
    cur = md(plan.currency, 10)
    lines = [
        "",
        "### After releasing the idle reservations (--what-if release-idle)",
        "",
        "GPU001's idle pods released for the whole window, GPU002's from the start of their "
        "idle tail; the peak hour packed again.",
        "",
        _row(
            [
                "Product",
                "Released",
                "Fewest at peak",
                "After release",
                "Nodes freed",
                "GPUs freed",
                f"Cost freed ({cur})",
                "GPUs held after",
            ]
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [_row([md(name, 80), *cells]) for name, cells in release_rows(plan)]
    return lines


def _queue_cells(u: QueueUsage) -> list[str]:
    return [
        f"{md(u.system, 20)} {md(u.kind, 20)} {md(u.queue, 80)}",
        md(u.flavor or "-", 80),
        md(u.resource, 60),
        num(u.quota, 1),
        num(u.peak_admitted, 1),
        num(u.peak_use, 1),
        num(u.quota_gpu_hours),
        num(u.admitted_gpu_hours),
        num(u.busy_gpu_hours),
        count(len({(w.namespace, w.name) for w in u.pending})),
    ]


def _queue_table(result: AuditResult) -> list[str]:
    plan = result.capacity
    if plan is None or not plan.queues:
        return []
    lines = [
        "",
        "### Queue quota over the window",
        "",
        _row(
            [
                "Queue",
                "Flavor",
                "Resource",
                "Quota",
                "Peak admitted",
                "Peak in use",
                "Quota GPU-h",
                "Admitted GPU-h",
                "Busy GPU-h",
                "Waiting",
            ]
        ),
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [_row(_queue_cells(u)) for u in plan.queues[:MAX_GROUPS]]
    if len(plan.queues) > MAX_GROUPS:
        lines += [
            "",
            f"The first {MAX_GROUPS} of {len(plan.queues)}; the JSON report lists them all.",
        ]
    return lines


def _suppressed(result: AuditResult) -> list[str]:
    if not result.suppressed:
        return []
    n = len(result.suppressed)
    lines = [
        "",
        f"## Waived findings ({n})",
        "",
        "Accepted by a waiver in the configuration; not counted above.",
        "",
        "| Code | Resource | GPU-h | Reason | Expires |",
        "|---|---|---:|---|---|",
    ]
    for s in result.suppressed[:MAX_LISTED]:
        f, w = s.finding, s.waiver
        lines.append(
            _row(
                [
                    md(f.code, 20),
                    md(f.resource.ref(), 120),
                    num(f.impact.gpu_hours, 1),
                    md(w.reason, 200),
                    w.expires.isoformat(),
                ]
            )
        )
    if n > MAX_LISTED:
        lines += ["", f"The first {MAX_LISTED} of {n}; the JSON report lists them all."]
    return lines


def _skipped(result: AuditResult) -> list[str]:
    if not result.skipped:
        return []
    lines = [
        "",
        "## Skipped checks",
        "",
        "These checks lacked the data they need; no finding from them does not mean healthy.",
        "",
    ]
    lines += [f"- {code(s.code)}: {md(s.reason, 400)}" for s in result.skipped]
    return lines


def _fixes(result: AuditResult) -> list[str]:
    """The changes `gpuaudit fix` writes (docs/fix.md), when there are any."""
    rows = fix_rows(result)
    if not rows:
        return []
    lines = ["", f"## Changes ({len(rows)})", "", md(fix_note(result), 600), ""]
    lines += [_row(["Change", "File", "Findings", "Saves per week"]), _row(["---"] * 4)]
    shown = rows[:MAX_LISTED]
    lines += [_row([md(t, 300), md(f, 160), md(w, 300), md(v, 80)]) for t, f, w, v in shown]
    if len(rows) > len(shown):
        lines += ["", f"The first {MAX_LISTED} of {len(rows)}; `gpuaudit fix` writes them all."]
    return lines


def _warnings(result: AuditResult) -> list[str]:
    if not result.warnings:
        return []
    return ["", "## Warnings", ""] + [f"- {md(w, 400)}" for w in result.warnings]


def render(result: AuditResult) -> str:
    """The full Markdown report."""
    lines = _title(result)
    for part in (
        _incomplete,
        _since,
        _weeks,
        _summary,
        _clusters,
        _trend,
        _findings,
        _breakdown,
        _capacity,
        _showback,
        _fixes,
        _suppressed,
        _skipped,
        _warnings,
    ):
        lines += part(result)
    return "\n".join(lines) + "\n"


def summary(result: AuditResult) -> str:
    """A short Markdown summary for a chat message: fleet figures, the top findings, trend
    counts when there is a comparison; at most `SUMMARY_LIMIT` characters."""
    s = result.summary
    cur = md(s.currency, 10)
    lines = [
        f"**GPU audit: {md(result.cluster or 'cluster', 80)}** ({window_text(result)})",
        f"GPUs {count(s.gpus_total)}, allocated {num(s.gpus_allocated_avg, 1)} on average "
        f"({pct(s.allocation_rate)}), mean engine activity {pct(s.mean_activity)}.",
        f"Idle {num(s.idle_gpu_hours)} of {num(s.allocated_gpu_hours)} allocated GPU-hours, "
        f"wasted **{money(s.wasted_cost, cur)}**.",
    ]
    if not result.complete:
        why = "; ".join(result.incomplete_reasons) or "some data is missing"
        lines.append(f"**INCOMPLETE:** {md(why, 300)}")
    c = result.comparison
    if c is not None:
        d = c.summary_delta.get("wasted_cost", {})
        lines.append(
            f"Since the previous report: {c.count(NEW)} new, {c.count(WORSE)} worse, "
            f"{c.count(IMPROVED)} improved, {len(c.resolved)} resolved; wasted cost "
            f"{delta_text('wasted_cost', d.get('change'), cur)}."
        )
    said = since_last_week.sentence(result)
    if said:
        lines.append(md(said, 400))
    risk_rows, waste_rows = lists(result.primaries)
    all_risks, all_waste = lists(result.findings)
    if risk_rows:
        top = risk_rows[:SUMMARY_RISKS]
        lines += ["", f"Risks, most urgent first ({len(top)} of {len(all_risks)} findings):"]
        lines += [_summary_line(result, i, f, cur) for i, f in enumerate(top, 1)]
    if waste_rows:
        top = waste_rows[:SUMMARY_TOP]
        lines += [
            "",
            f"Waste, ranked by wasted GPU-hours. Top {len(top)} of {len(all_waste)} findings:",
        ]
        lines += [_summary_line(result, i, f, cur) for i, f in enumerate(top, 1)]
    if not result.findings:
        lines += ["", "No findings."]
    tail = []
    if result.suppressed:
        tail.append(f"{plural(len(result.suppressed), 'finding')} waived")
    if result.skipped:
        tail.append(f"{plural(len(result.skipped), 'check')} skipped for lack of data")
    if tail:
        lines += ["", ", ".join(tail) + "."]
    text = "\n".join(lines)
    if len(text) > SUMMARY_LIMIT:
        # Cut at a line end so no escape or emphasis is left half open.
        text = text[: SUMMARY_LIMIT - 2].rsplit("\n", 1)[0] + "\n…"
    return text


def _summary_line(result: AuditResult, i: int, f: Finding, cur: str) -> str:
    status = result.status_of(f)
    tag = f" ({status})" if status and status != UNCHANGED else ""
    return (
        f"{i}. {f.severity.value} {md(f.code, 20)} {md(f.resource.ref(), 80)}: "
        f"{num(f.impact.gpu_hours)} GPU-h, {money(f.impact.cost, cur)}{tag}. "
        f"{md(f.message, 220)}"
    )


FORMAT = ReportFormat("markdown", render)
