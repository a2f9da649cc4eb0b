"""The HTML report: one self-contained file that opens offline and can be mailed or archived.

No JavaScript, no external fonts, stylesheets or images: the CSS is inline and the charts are
inline SVG drawn by matplotlib (`gpuaudit.report.charts`). Every string from the cluster goes
through `h()`: control characters become visible escapes, long names are cut, and the rest is
HTML-escaped, so a pod called `<script>` is shown, never run. Findings appear in the one ranked
order the audit computed; nothing is re-sorted here.
"""

from __future__ import annotations

import html

from gpuaudit import __version__
from gpuaudit.audit.assemble import AuditResult
from gpuaudit.audit.breakdown import Group
from gpuaudit.audit.capacity import CapacityPlan, Stat
from gpuaudit.audit.compare import IMPROVED, NEW, UNCHANGED, WORSE
from gpuaudit.checks.findings import Finding
from gpuaudit.report import charts
from gpuaudit.report.renderer import ReportFormat
from gpuaudit.report.text import (
    CLUSTER_HEAD,
    DELTA_LABELS,
    MAX_LISTED,
    attribution_rows,
    cluster_rows,
    count,
    delta_text,
    hours_text,
    num,
    pct,
    plural,
    resolved_fields,
    terminal,
    value_text,
    window_text,
)

MAX_FINDINGS = 100
"""Findings listed; the JSON report always has them all."""
MAX_GROUPS = 25

# Which way is better for each summary figure: +1 up, -1 down, 0 neither.
_BETTER = {
    "gpus_total": 0,
    "allocation_rate": 0,
    "mean_activity": 1,
    "allocated_gpu_hours": 0,
    "idle_gpu_hours": -1,
    "wasted_cost": -1,
}

CSS = """
:root {
  --ink: #1f2937; --muted: #6b7280; --line: #e5e7eb; --soft: #f9fafb; --accent: #2563eb;
  --good: #15803d; --bad: #b91c1c;
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body {
  margin: 0; color: var(--ink); background: #f3f4f6;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
    sans-serif;
}
main { max-width: 1320px; margin: 0 auto; padding: 28px 32px 40px; }
header { margin-bottom: 20px; }
h1 { font-size: 26px; margin: 0 0 4px; letter-spacing: -0.01em; }
h1 .cluster { color: var(--accent); word-break: break-all; }
h2 { font-size: 18px; margin: 0 0 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
p { margin: 4px 0 10px; }
.meta, .note { color: var(--muted); }
.note { font-size: 13px; max-width: 980px; }
section {
  background: #fff; border: 1px solid var(--line); border-radius: 10px;
  padding: 18px 22px; margin: 0 0 18px;
}
.banner {
  border-radius: 10px; padding: 12px 18px; margin: 0 0 18px;
  background: #fef2f2; border: 1px solid #fecaca; color: #7f1d1d;
}
.banner ul { margin: 6px 0 0; padding-left: 20px; }
.kpis {
  display: grid; grid-template-columns: repeat(auto-fit, minmax(190px, 1fr)); gap: 12px;
  margin: 0 0 18px;
}
.kpi { background: #fff; border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; }
.kpi .label { color: var(--muted); font-size: 12px; text-transform: uppercase;
  letter-spacing: 0.04em; }
.kpi .value { font-size: 26px; font-weight: 650; font-variant-numeric: tabular-nums;
  margin-top: 2px; }
.kpi .sub { color: var(--muted); font-size: 12.5px; }
.kpi.waste .value { color: var(--bad); }
.delta { font-size: 12.5px; font-variant-numeric: tabular-nums; }
.delta.good { color: var(--good); } .delta.bad { color: var(--bad); }
.delta.flat { color: var(--muted); }
.chart { display: block; width: 100%; height: auto; margin: 6px 0 2px; }
table { border-collapse: collapse; width: 100%; margin: 8px 0 4px; }
th, td { padding: 7px 9px; border-bottom: 1px solid var(--line); text-align: left;
  vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; text-transform: uppercase;
  letter-spacing: 0.03em; background: var(--soft); white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:hover { background: #fafafa; }
td.res { word-break: break-all; min-width: 180px; max-width: 300px; }
td.res .kind, td.res .node { display: block; color: var(--muted); font-size: 12px; }
td.msg { min-width: 360px; }
h1 .cluster, td, li { overflow-wrap: anywhere; }
td code { white-space: nowrap; }
td.msg .rec { color: #166534; margin-top: 4px; }
td.msg .rec::before { content: "\\2192\\00a0"; }
td.msg .also { margin-top: 8px; padding-top: 6px; border-top: 1px dashed var(--line); }
td .related { display: block; color: var(--muted); font-size: 12px; }
h2 code { font-size: 16px; }
code { font: 12.5px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px;
  font-weight: 600; white-space: nowrap; }
.sev-critical { background: #7f1d1d; color: #fff; }
.sev-high { background: #dc2626; color: #fff; }
.sev-medium { background: #f59e0b; color: #1f2937; }
.sev-low { background: #0e7490; color: #fff; }
.sev-info { background: #d1d5db; color: #1f2937; }
.st-new { background: #ede9fe; color: #5b21b6; }
.st-worse { background: #fee2e2; color: #991b1b; }
.st-improved { background: #dcfce7; color: #166534; }
.st-unchanged { background: #f3f4f6; color: #4b5563; }
.st-resolved { background: #dbeafe; color: #1e40af; }
table.narrow { max-width: 760px; }
.counts { display: flex; flex-wrap: wrap; gap: 8px; margin: 8px 0 4px; }
.counts .badge { font-size: 13px; padding: 3px 12px; }
.scroll { overflow-x: auto; }
.bar { position: relative; display: inline-block; width: 70px; height: 8px;
  background: #f3f4f6; border-radius: 4px; margin-left: 8px; vertical-align: middle; }
.bar > span { position: absolute; left: 0; top: 0; bottom: 0; background: #f87171;
  border-radius: 4px; }
ul.plain { margin: 6px 0; padding-left: 20px; }
footer { color: var(--muted); font-size: 12.5px; text-align: center; margin-top: 8px; }
@media print {
  body { background: #fff; }
  main { padding: 0; max-width: none; }
  section, .kpi { break-inside: avoid; border-color: #d1d5db; }
}
"""


def h(text: object, limit: int = 200) -> str:
    """Untrusted text as HTML: control characters shown as visible escapes, long text cut, and
    `<`, `>`, `&` and quotes escaped (safe in element content and quoted attributes)."""
    return html.escape(terminal(str(text), limit), quote=True)


def _badge(kind: str, text: str) -> str:
    return f'<span class="badge {kind}">{h(text, 30)}</span>'


def _sev(f: Finding) -> str:
    return _badge(f"sev-{f.severity.value}", f.severity.value)


def _status(status: str) -> str:
    return _badge(f"st-{status}", status) if status else ""


def _header(result: AuditResult) -> str:
    version = h(__version__, 40)
    return (
        "<header>"
        f'<h1>GPU audit <span class="cluster">{h(result.cluster or "cluster", 120)}</span></h1>'
        f'<p class="meta">Window {h(window_text(result))}. Generated {h(result.generated_at)} '
        f"by gpuaudit {version}.</p>"
        "</header>"
    )


def _incomplete(result: AuditResult) -> str:
    if result.complete:
        return ""
    reasons = result.incomplete_reasons or ("some data is missing",)
    items = "".join(f"<li>{h(r, 400)}</li>" for r in reasons)
    return (
        '<div class="banner" role="alert"><strong>INCOMPLETE.</strong> Some sources answered '
        "only in part, so the figures below may understate the waste."
        f"<ul>{items}</ul></div>"
    )


def _delta(result: AuditResult, key: str) -> str:
    c = result.comparison
    if c is None:
        return ""
    d = c.summary_delta.get(key)
    change = d.get("change") if d else None
    if change is None:
        return ""
    better = _BETTER.get(key, 0)
    tone = "flat"
    if abs(change) > 1e-9 and better:
        tone = "good" if (change > 0) == (better > 0) else "bad"
    text = delta_text(key, change, result.summary.currency)
    return f'<div class="delta {tone}">{h(text)} since the previous report</div>'


def _kpis(result: AuditResult) -> str:
    s = result.summary
    cur = s.currency

    def card(label: str, value: str, sub: str, key: str = "", cls: str = "") -> str:
        return (
            f'<div class="kpi {cls}"><div class="label">{label}</div>'
            f'<div class="value">{value}</div><div class="sub">{sub}</div>'
            f"{_delta(result, key) if key else ''}</div>"
        )

    idle_share = s.idle_gpu_hours / s.allocated_gpu_hours if s.allocated_gpu_hours > 0 else None
    return (
        '<div class="kpis">'
        + card("GPUs", count(s.gpus_total), "physical GPUs in the fleet", "gpus_total")
        + card(
            "Allocated",
            pct(s.allocation_rate),
            f"{num(s.gpus_allocated_avg, 1)} GPUs on average, {num(s.gpus_allocated_now, 1)} now",
            "allocation_rate",
        )
        + card(
            "Engine activity",
            pct(s.mean_activity),
            "mean over allocated GPU-hours",
            "mean_activity",
        )
        + card(
            "Idle GPU-hours",
            num(s.idle_gpu_hours),
            f"{pct(idle_share)} of {num(s.allocated_gpu_hours)} allocated",
            "idle_gpu_hours",
        )
        + card(
            "Wasted",
            f"{num(s.wasted_cost)} <small>{h(cur, 10)}</small>",
            "idle GPU-hours at the configured prices",
            "wasted_cost",
            "waste",
        )
        + "</div>"
    )


def _charts(result: AuditResult) -> str:
    b = result.breakdown
    if b is None:
        return ""
    fleet = charts.fleet_chart(b.charts, result.summary.gpus_total)
    heat = charts.heatmap_chart(b.charts)
    if not fleet and not heat:
        return (
            '<section id="week"><h2>The week</h2>'
            '<p class="note">No GPU was held by a pod in this window: nothing to chart.</p>'
            "</section>"
        )
    parts = ['<section id="week"><h2>The week</h2>']
    if fleet:
        parts += [
            '<h3>Fleet allocation and engine activity per hour</h3><p class="note">The blue '
            "area is the number of GPUs held by pods in each hour, against the size of the "
            "fleet (dashed). The orange line is the mean engine activity of the allocated "
            "GPUs (right axis): allocation well above activity means GPUs are reserved but "
            "doing little.</p>",
            fleet,
        ]
    if heat:
        n = len(b.charts.heatmap_rows)
        parts += [
            "<h3>Engine activity per namespace and hour</h3>"
            f'<p class="note">The {plural(n, "namespace")} holding the most '
            "GPU-hours, busiest first. Each cell is the mean engine activity of the GPUs the "
            "namespace held in that hour: red is idle, green is busy, grey means it held no GPU. "
            "Long red stretches are reservations worth reclaiming.</p>",
            heat,
        ]
    parts.append("</section>")
    return "".join(parts)


def _trend(result: AuditResult) -> str:
    c = result.comparison
    if c is None:
        return ""
    cur = result.summary.currency
    when = f", generated {h(c.previous_generated_at, 40)}" if c.previous_generated_at else ""
    counts = "".join(
        _badge(f"st-{status}", f"{n} {status}")
        for status, n in (
            (NEW, c.count(NEW)),
            (WORSE, c.count(WORSE)),
            (IMPROVED, c.count(IMPROVED)),
            ("resolved", len(c.resolved)),
            (UNCHANGED, c.count(UNCHANGED)),
        )
    )
    rows = []
    for key, label in DELTA_LABELS.items():
        d = c.summary_delta.get(key)
        if d is None:
            continue
        change = d.get("change")
        better = _BETTER.get(key, 0)
        tone = "flat"
        if change is not None and abs(change) > 1e-9 and better:
            tone = "good" if (change > 0) == (better > 0) else "bad"
        rows.append(
            f"<tr><td>{label}</td>"
            f'<td class="num">{h(value_text(key, d.get("before"), cur))}</td>'
            f'<td class="num">{h(value_text(key, d.get("now"), cur))}</td>'
            f'<td class="num"><span class="delta {tone}">'
            f"{h(delta_text(key, change, cur))}</span></td></tr>"
        )
    out = [
        '<section id="trend">',
        f"<h2>Trend since {h(c.source, 80)}{when}</h2>",
        '<p class="note">Findings are matched with the previous report by check, namespace and '
        "owning workload. Worse means a higher severity or over 10 % more wasted GPU-hours; "
        "resolved findings are gone this week.</p>",
        f'<div class="counts">{counts}</div>',
        '<table class="narrow"><thead><tr><th>Figure</th><th class="num">Before</th>'
        '<th class="num">Now</th><th class="num">Change</th></tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table>",
    ]
    if c.resolved:
        items = []
        for item in c.resolved[:MAX_LISTED]:
            code, sev, ref, gh = resolved_fields(item)
            hours = "n/a" if gh is None else num(gh, 1)
            items.append(
                f"<tr><td><code>{h(code, 20)}</code></td><td>{h(sev, 20)}</td>"
                f'<td class="res">{h(ref, 120)}</td><td class="num">{hours}</td></tr>'
            )
        more = (
            f'<p class="note">…and {len(c.resolved) - MAX_LISTED} more in the JSON report.</p>'
            if len(c.resolved) > MAX_LISTED
            else ""
        )
        out.append(
            f'<h3>Resolved ({len(c.resolved)})</h3><table class="narrow"><thead><tr><th>Code</th>'
            '<th>Severity</th><th>Resource</th><th class="num">GPU-h then</th></tr></thead>'
            f"<tbody>{''.join(items)}</tbody></table>{more}"
        )
    out.append("</section>")
    return "".join(out)


def _finding_row(result: AuditResult, i: int, f: Finding) -> str:
    r = f.resource
    node = f'<span class="node">on {h(r.node, 80)}</span>' if r.node and r.kind != "Node" else ""
    trend = ""
    if result.comparison is not None:
        trend = f"<td>{_status(result.status_of(f))}</td>"
    # The other findings on the same resource: their codes under this one's, their text below.
    also = result.related_to(f)
    related = "".join(f'<span class="related">+ <code>{h(g.code, 20)}</code></span>' for g in also)
    more = "".join(
        f'<div class="also"><code>{h(g.code, 20)}</code> {h(g.message, 400)}'
        f'<div class="rec">{h(g.recommendation, 400)}</div></div>'
        for g in also
    )
    return (
        f'<tr><td class="num">{i}</td><td>{_sev(f)}</td><td><code>{h(f.code, 20)}</code>'
        f"{related}</td>"
        f'<td class="res">{h(r.ref(), 160)}<span class="kind">{h(r.kind, 30)}</span>{node}</td>'
        f'<td class="num">{num(f.impact.gpu_hours, 1)}</td>'
        f'<td class="num">{num(f.impact.cost)}</td>'
        f'<td class="msg">{h(f.message, 500)}<div class="rec">{h(f.recommendation, 500)}</div>'
        f"{more}</td>{trend}</tr>"
    )


def _findings(result: AuditResult) -> str:
    n = len(result.findings)
    if not n:
        return '<section id="findings"><h2>Findings</h2><p>No findings.</p></section>'
    rows_all = result.primaries
    shown = rows_all[:MAX_FINDINGS]
    trend_head = "<th>Trend</th>" if result.comparison is not None else ""
    more = (
        f'<p class="note">The first {len(shown)} of {len(rows_all)} resources with findings; '
        "the JSON report lists them all.</p>"
        if len(rows_all) > len(shown)
        else ""
    )
    under = n - len(rows_all)
    grouped = (
        f" {under} of them are shown under another finding on the same resource (its related "
        "codes)."
        if under
        else ""
    )
    rows = "".join(_finding_row(result, i, f) for i, f in enumerate(shown, 1))
    return (
        f'<section id="findings"><h2>Findings ({n}, worst first)</h2>'
        '<p class="note">Ranked by severity, then by wasted GPU-hours over the window; cost is '
        "those GPU-hours at the configured price of each GPU model. "
        f"<code>gpuaudit explain CODE</code> describes each check.{grouped} Together they "
        f"count {num(result.summary.findings_gpu_hours)} GPU-hours, none twice.</p>"
        '<table><thead><tr><th class="num">#</th><th>Severity</th><th>Code</th>'
        '<th>Resource</th><th class="num">GPU-h</th>'
        f'<th class="num">{h(result.summary.currency, 10)}</th><th>Finding and what to do</th>'
        f"{trend_head}</tr></thead><tbody>{rows}</tbody></table>{more}</section>"
    )


def _clusters(result: AuditResult) -> str:
    """A scan of every cluster: a row per cluster, then the fleet total (their sums)."""
    rows = cluster_rows(result)
    if not rows:
        return ""
    head = "".join(
        f"<th>{c}</th>" if i == 0 else f'<th class="num">{c}</th>'
        for i, c in enumerate(CLUSTER_HEAD)
    )
    body = []
    for i, (name, *cells) in enumerate(rows):
        first = "<strong>fleet total</strong>" if i == len(rows) - 1 else h(name, 80)
        tds = "".join(f'<td class="num">{h(c, 40)}</td>' for c in cells)
        body.append(f'<tr><td class="res">{first}</td>{tds}</tr>')
    return (
        f'<section id="clusters"><h2>Clusters (by {h(result.cluster_label, 60)})</h2>'
        '<p class="note">Each cluster\'s figures over its own GPUs and findings; the fleet '
        "total is their sum (mean activity is the fleet's weighted mean).</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        "</section>"
    )


def _group_table(sid: str, title: str, key_name: str, groups: tuple[Group, ...], cur: str) -> str:
    rows = []
    for g in groups[:MAX_GROUPS]:
        share = g.idle_gpu_hours / g.allocated_gpu_hours if g.allocated_gpu_hours > 0 else None
        width = 0.0 if share is None else max(0.0, min(100.0, share * 100.0))
        rows.append(
            f'<tr><td class="res">{h(g.key, 80)}</td>'
            f'<td class="num">{num(g.allocated_gpu_hours)}</td>'
            f'<td class="num">{num(g.idle_gpu_hours)}</td>'
            f'<td class="num">{pct(share)}<span class="bar">'
            f'<span style="width:{num(width, 1, grouped=False)}%"></span></span></td>'
            f'<td class="num">{pct(g.mean_activity)}</td>'
            f'<td class="num">{num(g.wasted_cost)}</td></tr>'
        )
    more = (
        f'<p class="note">The first {MAX_GROUPS} of {len(groups)}; the JSON report lists them '
        "all.</p>"
        if len(groups) > MAX_GROUPS
        else ""
    )
    body = (
        f"<table><thead><tr><th>{key_name}</th>"
        '<th class="num">Allocated GPU-h</th><th class="num">Idle GPU-h</th>'
        '<th class="num">Idle share</th><th class="num">Activity</th>'
        f'<th class="num">Wasted {cur}</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
        if rows
        else "<p>No GPU was held in this window.</p>"
    )
    return (
        f'<section id="{sid}"><h2>{title}</h2>'
        '<p class="note">Idle GPU-hours are allocated hours below the idle activity threshold; '
        "activity is the mean engine activity of the allocated GPU-hours. Most waste first.</p>"
        f"{body}{more}</section>"
    )


def _attribution(result: AuditResult) -> str:
    """The attribution ledger: allocated GPU-hours by method, unattributed by reason."""
    rows = attribution_rows(result)
    if not rows:
        return ""
    ledger = result.attribution
    unknown = (
        f'<p class="note">Unattributed GPU-hours are unknown: {h(ledger.unknown, 300)}.</p>'
        if ledger is not None and ledger.unknown
        else ""
    )
    body = "".join(
        f"<tr><td>{h(side, 20)}</td><td>{h(words, 80)}</td>"
        f'<td class="num">{h(hours_text(value), 30)}</td>'
        f'<td class="num">{"" if pods is None else h(count(pods), 20)}</td></tr>'
        for side, words, value, pods in rows
    )
    return (
        '<section id="attribution"><h2>Attribution of allocated GPU-hours</h2>'
        '<p class="note">How the allocated GPU-hours were joined to pods, and the ones no DCGM '
        "series could be joined to, with the reason.</p>"
        "<table><thead><tr><th>Attribution</th><th>How or why</th>"
        '<th class="num">GPU-hours</th><th class="num">Pods</th></tr></thead>'
        f"<tbody>{body}</tbody></table>{unknown}</section>"
    )


def _breakdown(result: AuditResult) -> str:
    b = result.breakdown
    if b is None:
        return ""
    cur = h(result.summary.currency, 10)
    parts = [_group_table("by-namespace", "Waste by namespace", "Namespace", b.by_namespace, cur)]
    if b.group_label:
        label = h(b.group_label, 60)
        parts.append(
            _group_table("by-label", f"Waste by label <code>{label}</code>", label, b.by_group, cur)
        )
    return "".join(parts)


def _stat(s: Stat) -> str:
    return f"{num(s.peak, 1)} / {num(s.p95, 1)} / {num(s.mean, 1)}"


def _capacity(result: AuditResult) -> str:
    """The capacity plan: its sentences, a chart and a row per GPU product, the queues and
    the assumptions."""
    plan = result.capacity
    if plan is None or not plan.by_product:
        return ""
    rows = []
    for product, p in plan.by_product.items():
        rows.append(
            f'<tr><td class="res">{h(plan.short_names.get(product, product), 80)}</td>'
            f'<td class="num">{count(p.nodes)}</td>'
            f'<td class="num">{count(p.nodes_cordoned)}</td>'
            f'<td class="num">{count(p.nodes_ran_gpu_pods)}</td>'
            f'<td class="num">{count(p.min_nodes_at_peak)}</td>'
            f'<td class="num">{_stat(p.gpus_held)}</td>'
            f'<td class="num">{_stat(p.gpus_busy)}</td></tr>'
        )
    sentences = "".join(f"<li>{h(line, 600)}</li>" for line in plan.headlines())
    hint = plan.what_if_hint()
    assumptions = "".join(f"<li>{h(a, 800)}</li>" for a in plan.assumptions)
    return (
        '<section id="capacity"><h2>Capacity plan</h2>'
        f'<ul class="plain">{sentences}</ul>'
        + (f'<p class="note">{h(hint, 300)}</p>' if hint else "")
        + '<p class="note">GPUs held (blue) and busy (green) per hour, against the GPUs of the '
        "product's nodes (dashed) and of the fewest nodes the peak hour's work fit on "
        "(dotted): the gap between the dotted line and the dashed one is hardware the "
        "window's work did not need. In the table, GPUs held and busy read peak / p95 / mean "
        "per hour.</p>"
        f"{charts.capacity_chart(plan)}"
        '<table><thead><tr><th>Product</th><th class="num">Nodes</th>'
        '<th class="num">Cordoned</th>'
        '<th class="num">Ran GPU pods</th><th class="num">Fewest at peak</th>'
        '<th class="num">GPUs held</th>'
        '<th class="num">GPUs busy</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
        f"{_after_release(plan) if plan.release_idle else ''}"
        f"{_queue_table(result)}"
        f'<h3>Assumptions</h3><ol class="note">{assumptions}</ol></section>'
    )


def _after_release(plan: CapacityPlan) -> str:
    """`--what-if release-idle`: per product, the plan after releasing the idle reservations."""
    cur = h(plan.currency, 10)
    rows = []
    for product, p in plan.by_product.items():
        a = plan.after_release_idle.get(product, p)
        f = plan.freed.get(product)
        rows.append(
            f'<tr><td class="res">{h(plan.short_names.get(product, product), 80)}</td>'
            f'<td class="num">{count(plan.released_by_product.get(product, 0))}</td>'
            f'<td class="num">{count(p.min_nodes_at_peak)}</td>'
            f'<td class="num">{count(a.min_nodes_at_peak)}</td>'
            f'<td class="num">{count(f.nodes if f else 0)}</td>'
            f'<td class="num">{num(f.gpus if f else 0.0, 1)}</td>'
            f'<td class="num">{num(f.cost if f else 0.0)}</td>'
            f'<td class="num">{_stat(a.gpus_held)}</td></tr>'
        )
    return (
        '<h3 id="after-release">After releasing the idle reservations</h3>'
        '<p class="note">--what-if release-idle: GPU001\'s idle pods released for the whole '
        "window, GPU002's from the start of their idle tail; the peak hour packed again.</p>"
        '<table><thead><tr><th>Product</th><th class="num">Released</th>'
        '<th class="num">Fewest at peak</th><th class="num">After release</th>'
        '<th class="num">Nodes freed</th><th class="num">GPUs freed</th>'
        f'<th class="num">Cost freed ({cur})</th><th class="num">GPUs held after</th>'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _queue_table(result: AuditResult) -> str:
    plan = result.capacity
    if plan is None or not plan.queues:
        return ""
    rows = "".join(
        f'<tr><td class="res">{h(u.queue, 80)}<span class="kind">{h(u.system, 20)} '
        f"{h(u.kind, 20)}</span></td><td>{h(u.flavor or '-', 80)}</td>"
        f"<td><code>{h(u.resource, 60)}</code></td>"
        f'<td class="num">{num(u.quota, 1)}</td><td class="num">{num(u.peak_admitted, 1)}</td>'
        f'<td class="num">{num(u.peak_use, 1)}</td><td class="num">{num(u.quota_gpu_hours)}</td>'
        f'<td class="num">{num(u.admitted_gpu_hours)}</td>'
        f'<td class="num">{num(u.busy_gpu_hours)}</td>'
        f'<td class="num">{count(len({(w.namespace, w.name) for w in u.pending}))}</td></tr>'
        for u in plan.queues[:MAX_GROUPS]
    )
    more = (
        f'<p class="note">The first {MAX_GROUPS} of {len(plan.queues)}; the JSON report lists '
        "them all.</p>"
        if len(plan.queues) > MAX_GROUPS
        else ""
    )
    return (
        "<h3>Queue quota over the window</h3>"
        '<p class="note">Per Kueue ClusterQueue and Volcano Queue, flavor and GPU resource: '
        "the quota, the most admitted and the most in use at once (admitted, held by its pods, "
        "or held by any pod of its namespaces on the flavor's nodes), and GPU-hours of quota, "
        "admitted and busy. <code>gpuaudit explain GPU090</code> describes the rules.</p>"
        "<table><thead><tr><th>Queue</th><th>Flavor</th><th>Resource</th>"
        '<th class="num">Quota</th><th class="num">Peak admitted</th>'
        '<th class="num">Peak in use</th><th class="num">Quota GPU-h</th>'
        '<th class="num">Admitted GPU-h</th><th class="num">Busy GPU-h</th>'
        f'<th class="num">Waiting</th></tr></thead><tbody>{rows}</tbody></table>{more}'
    )


def _suppressed(result: AuditResult) -> str:
    if not result.suppressed:
        return ""
    n = len(result.suppressed)
    rows = "".join(
        f"<tr><td><code>{h(s.finding.code, 20)}</code></td>"
        f'<td class="res">{h(s.finding.resource.ref(), 160)}</td>'
        f'<td class="num">{num(s.finding.impact.gpu_hours, 1)}</td>'
        f"<td>{h(s.waiver.reason, 300)}</td><td>{h(s.waiver.expires.isoformat())}</td></tr>"
        for s in result.suppressed[:MAX_LISTED]
    )
    more = (
        f'<p class="note">The first {MAX_LISTED} of {n}; the JSON report lists them all.</p>'
        if n > MAX_LISTED
        else ""
    )
    return (
        f'<section id="waived"><h2>Waived findings ({n})</h2>'
        '<p class="note">Accepted by a waiver in the configuration, with a reason and an expiry '
        "date; not counted in the findings above.</p>"
        "<table><thead><tr><th>Code</th><th>Resource</th>"
        '<th class="num">GPU-h</th><th>Reason</th><th>Expires</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>{more}</section>"
    )


def _listing(sid: str, title: str, note: str, items: list[str]) -> str:
    if not items:
        return ""
    lis = "".join(f"<li>{i}</li>" for i in items)
    return (
        f'<section id="{sid}"><h2>{title}</h2><p class="note">{note}</p>'
        f'<ul class="plain">{lis}</ul></section>'
    )


def _footer(result: AuditResult) -> str:
    return (
        f"<footer>gpuaudit {h(__version__, 40)} · checks run: "
        f"{h(', '.join(result.checks_run) or 'none', 400)}</footer>"
    )


def render(result: AuditResult) -> str:
    """The whole report as one HTML document."""
    title = f"GPU audit: {h(result.cluster or 'cluster', 80)}"
    skipped = [f"<code>{h(s.code, 20)}</code>: {h(s.reason, 400)}" for s in result.skipped]
    warnings = [h(w, 400) for w in result.warnings]
    body = "".join(
        [
            _header(result),
            _incomplete(result),
            _kpis(result),
            _attribution(result),
            _clusters(result),
            _charts(result),
            _trend(result),
            _findings(result),
            _breakdown(result),
            _capacity(result),
            _suppressed(result),
            _listing(
                "skipped",
                "Skipped checks",
                "These checks lacked the data they need; no finding from them does not mean "
                "healthy.",
                skipped,
            ),
            _listing("warnings", "Warnings", "What the audit noticed about its data.", warnings),
            _footer(result),
        ]
    )
    # Wide tables scroll inside their section on narrow screens. Every cluster string is
    # escaped by now, so these tags can only be ours.
    body = body.replace("<table", '<div class="scroll"><table').replace(
        "</table>", "</table></div>"
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="generator" content="gpuaudit {h(__version__)}">\n'
        f"<title>{title}</title>\n<style>{CSS}</style>\n</head>\n"
        f"<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n"
    )


FORMAT = ReportFormat("html", render)
