"""The HTML report: one self-contained file that opens offline and can be mailed or archived.

No JavaScript, no external fonts, stylesheets or images: the stylesheet (`templates/report.css`)
is inline and the charts are inline SVG drawn by matplotlib (`gpuaudit.report.charts`).

This module turns an audit result into plain values, section by section: figures already
formatted, text from the cluster already made visible (`terminal()`: control characters shown
as escapes, long names cut). The Jinja2 templates under `templates/` lay those values out, with
autoescaping on for every template, so a pod called `<script>` is shown, never run: nothing
from the cluster reaches the page except through the escaper. Findings appear in the one
ranked order the audit computed, in a table for each list (the risks, then the waste), alike
ones folded into one row as in the terminal (`gpuaudit.report.fold`); nothing is re-sorted
here. A table of contents links every section, and the breakdown by namespace and label comes
before the findings: the page stays short enough to print.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources

from jinja2 import Environment, PackageLoader, StrictUndefined, Template
from jinja2.ext import Extension
from jinja2.lexer import Token, TokenStream
from markupsafe import Markup

from gpuaudit import __version__
from gpuaudit.audit.assemble import AuditResult
from gpuaudit.audit.breakdown import Group
from gpuaudit.audit.capacity import CapacityPlan
from gpuaudit.audit.compare import IMPROVED, NEW, UNCHANGED, WORSE
from gpuaudit.checks.findings import ORDER_RULE, Category
from gpuaudit.inventory.queue_usage import QueueUsage
from gpuaudit.report import charts, since_last_week
from gpuaudit.report.fold import Row as Fold
from gpuaudit.report.fold import fold
from gpuaudit.report.renderer import ReportFormat
from gpuaudit.report.showback_text import showback_view
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

MAX_FINDINGS = 100
"""Rows of findings listed (a row may fold alike findings); the JSON report always has them
all."""
MAX_FIXES = 8
"""Changes listed (the page is printed; `gpuaudit fix`'s README and the JSON have them all)."""
MAX_FOLDED_NAMES = 12
"""Resources of a folded row named under it; the JSON report names them all."""
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

_LAYOUT_BREAK = re.compile(r"\n[ \t]*")


class _Layout(Extension):
    """In the section templates (`templates/parts/`), a line break and the indentation after it
    are there for the reader only: the page gets neither. So the templates are laid out like
    the HTML they hold while each section is written on one line, and re-indenting a template
    never changes a page. Only the templates' own text is touched, never a value."""

    def filter_stream(self, stream: TokenStream) -> Iterator[Token]:
        layout = (stream.name or "").startswith("parts/")
        for token in stream:
            if layout and token.type == "data":
                token = Token(token.lineno, "data", _LAYOUT_BREAK.sub("", token.value))
            yield token


@cache
def _template() -> Template:
    env = Environment(
        loader=PackageLoader("gpuaudit.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        extensions=[_Layout],
    )
    return env.get_template("report.html.j2")


@cache
def _css() -> Markup:
    # Our own stylesheet, shipped as package data: trusted, and it must reach the page as
    # written (its quotes and `>` selectors are CSS, not text to escape).
    css = resources.files("gpuaudit.report").joinpath("templates/report.css")
    return Markup(css.read_text(encoding="utf-8"))


def _svg(svg: str) -> Markup:
    # Trusted: drawn by `gpuaudit.report.charts` from the audit's figures. The only text from
    # the cluster in it (namespaces as tick labels, GPU products as titles) went through
    # `terminal()` and was escaped by matplotlib's SVG writer, as the hostile-name tests check;
    # escaping the SVG again would show its markup instead of drawing it.
    return Markup(svg)


# ---- the values each section lays out -----------------------------------------------------


@dataclass(frozen=True)
class Header:
    cluster: str
    window: str
    generated: str


@dataclass(frozen=True)
class Delta:
    """A change since the previous report and its tone: `good`, `bad` or `flat`."""

    tone: str
    text: str


@dataclass(frozen=True)
class Kpi:
    """One figure card at the top of the page."""

    label: str
    value: str
    sub: str
    delta: Delta | None
    unit: str = ""
    cls: str = ""


@dataclass(frozen=True)
class Week:
    """The two charts of the week, either one empty when there is nothing to draw."""

    fleet: Markup
    heat: Markup
    namespaces: str


@dataclass(frozen=True)
class TrendRow:
    label: str
    before: str
    now: str
    change: Delta


@dataclass(frozen=True)
class ResolvedRow:
    code: str
    severity: str
    ref: str
    hours: str


@dataclass(frozen=True)
class Trend:
    source: str
    when: str
    counts: tuple[tuple[str, str], ...]
    """(status, badge text) for each status, in the order the page shows them."""
    rows: tuple[TrendRow, ...]
    resolved: tuple[ResolvedRow, ...]
    resolved_total: int
    resolved_more: int


@dataclass(frozen=True)
class Related:
    """Another finding on the resource of a listed one."""

    code: str
    message: str
    recommendation: str


@dataclass(frozen=True)
class FindingRow:
    """One row of a findings table: a finding, or alike findings folded into one."""

    rank: int
    severity: str
    code: str
    related: tuple[Related, ...]
    ref: str
    """The resource; for a fold, the pattern its resources share (`batch/report-batch-*`)."""
    kind: str
    """The resource's kind; for a fold, how many (`13 Pods`)."""
    node: str
    owner: str
    """Who it is for (`text.owner_text`): `unknown` where nothing names one."""
    contact: str
    """The owner's contact (`gpuaudit.io/contact`); empty where none is given."""
    gpu_hours: str
    cost: str
    message: str
    recommendation: str
    status: str | None
    """new, worse, improved, unchanged or empty; None without a previous report."""
    others: tuple[str, ...] = ()
    """For a fold: the resources of its other findings (at most `MAX_FOLDED_NAMES`)."""
    others_more: int = 0
    """For a fold: how many of its other findings `others` leaves out."""


@dataclass(frozen=True)
class FindingList:
    """The table of one list of findings: the risks, or the waste."""

    sid: str
    title: str
    note: str
    findings: int
    rows: tuple[FindingRow, ...]
    total_rows: int
    """Rows of this list in all; `rows` may hold fewer (`MAX_FINDINGS` in all)."""


@dataclass(frozen=True)
class Findings:
    total: int
    lists: tuple[FindingList, ...]
    rule: str
    """The order's rule, for the heading."""
    primaries: int
    under: int
    folded: int
    """Findings folded under another row of alike ones."""
    currency: str
    gpu_hours: str
    trend: bool


@dataclass(frozen=True)
class Entry:
    """A line of the table of contents: the section's id and its title."""

    sid: str
    title: str
    sub: tuple[Entry, ...] = ()


@dataclass(frozen=True)
class Row:
    """A table row of a name and the figures after it, in the order of the columns."""

    name: str
    figures: tuple[str, ...]


@dataclass(frozen=True)
class Clusters:
    label: str
    head: tuple[str, ...]
    rows: tuple[Row, ...]
    """One per cluster, then the fleet total."""


@dataclass(frozen=True)
class GroupRow:
    key: str
    allocated: str
    idle: str
    idle_share: str
    bar_width: str
    activity: str
    wasted: str


@dataclass(frozen=True)
class GroupTable:
    sid: str
    title: str
    label: str
    """The label's key, shown as code after the title; empty for namespaces."""
    key_name: str
    rows: tuple[GroupRow, ...]
    total: int
    currency: str


@dataclass(frozen=True)
class AttributionRow:
    side: str
    words: str
    hours: str
    pods: str


@dataclass(frozen=True)
class Attribution:
    rows: tuple[AttributionRow, ...]
    unknown: str


@dataclass(frozen=True)
class Causes:
    effective: str
    allocated: str
    chart: Markup
    rows: tuple[tuple[str, str, str], ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class QueueRow:
    queue: str
    system: str
    kind: str
    flavor: str
    resource: str
    figures: tuple[str, ...]
    """Quota, peak admitted, peak in use, GPU-hours of quota, admitted and busy, waiting."""


@dataclass(frozen=True)
class Capacity:
    sentences: tuple[str, ...]
    hint: str
    chart: Markup
    products: tuple[Row, ...]
    notes: tuple[str, ...]
    """What the figures cannot see (GPUs of unknown activity), a sentence each."""
    release: tuple[Row, ...] | None
    """Only with `--what-if release-idle`."""
    currency: str
    queues: tuple[QueueRow, ...]
    queues_total: int
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class WaivedRow:
    code: str
    ref: str
    gpu_hours: str
    reason: str
    expires: str


@dataclass(frozen=True)
class Waived:
    total: int
    rows: tuple[WaivedRow, ...]


# ---- from the audit result to those values ------------------------------------------------


def _tone(key: str, change: float | None) -> str:
    better = _BETTER.get(key, 0)
    if change is not None and abs(change) > 1e-9 and better:
        return "good" if (change > 0) == (better > 0) else "bad"
    return "flat"


def _header(result: AuditResult) -> Header:
    return Header(
        cluster=terminal(result.cluster or "cluster", 120),
        window=terminal(window_text(result)),
        generated=terminal(str(result.generated_at)),
    )


def _incomplete(result: AuditResult) -> tuple[str, ...]:
    if result.complete:
        return ()
    reasons = result.incomplete_reasons or ("some data is missing",)
    return tuple(terminal(r, 400) for r in reasons)


def _delta(result: AuditResult, key: str) -> Delta | None:
    c = result.comparison
    if c is None:
        return None
    d = c.summary_delta.get(key)
    change = d.get("change") if d else None
    if change is None:
        return None
    return Delta(_tone(key, change), terminal(delta_text(key, change, result.summary.currency)))


def _kpis(result: AuditResult) -> tuple[Kpi, ...]:
    s = result.summary
    idle_share = s.idle_gpu_hours / s.allocated_gpu_hours if s.allocated_gpu_hours > 0 else None
    return (
        Kpi(
            "GPUs",
            count(s.gpus_total),
            "physical GPUs in the fleet",
            _delta(result, "gpus_total"),
        ),
        Kpi(
            "Allocated",
            pct(s.allocation_rate),
            f"{num(s.gpus_allocated_avg, 1)} GPUs on average, {num(s.gpus_allocated_now, 1)} now",
            _delta(result, "allocation_rate"),
        ),
        Kpi(
            "Engine activity",
            pct(s.mean_activity),
            "mean over allocated GPU-hours",
            _delta(result, "mean_activity"),
        ),
        Kpi(
            "Idle GPU-hours",
            num(s.idle_gpu_hours),
            f"{pct(idle_share)} of {num(s.allocated_gpu_hours)} allocated",
            _delta(result, "idle_gpu_hours"),
        ),
        Kpi(
            "Wasted",
            num(s.wasted_cost),
            "idle GPU-hours at the configured prices",
            _delta(result, "wasted_cost"),
            unit=terminal(s.currency, 10),
            cls="waste",
        ),
    )


def _week(result: AuditResult) -> Week | None:
    b = result.breakdown
    if b is None:
        return None
    return Week(
        fleet=_svg(charts.fleet_chart(b.charts, result.summary.gpus_total)),
        heat=_svg(charts.heatmap_chart(b.charts)),
        namespaces=plural(len(b.charts.heatmap_rows), "namespace"),
    )


def _trend(result: AuditResult) -> Trend | None:
    c = result.comparison
    if c is None:
        return None
    cur = result.summary.currency
    counts = (
        (NEW, c.count(NEW)),
        (WORSE, c.count(WORSE)),
        (IMPROVED, c.count(IMPROVED)),
        ("resolved", len(c.resolved)),
        (UNCHANGED, c.count(UNCHANGED)),
    )
    rows = []
    for key, label in DELTA_LABELS.items():
        d = c.summary_delta.get(key)
        if d is None:
            continue
        change = d.get("change")
        rows.append(
            TrendRow(
                label,
                terminal(value_text(key, d.get("before"), cur)),
                terminal(value_text(key, d.get("now"), cur)),
                Delta(_tone(key, change), terminal(delta_text(key, change, cur))),
            )
        )
    resolved = []
    for item in c.resolved[:MAX_LISTED]:
        code, sev, ref, gh = resolved_fields(item)
        hours = "n/a" if gh is None else num(gh, 1)
        resolved.append(
            ResolvedRow(terminal(code, 20), terminal(sev, 20), terminal(ref, 120), hours)
        )
    return Trend(
        source=terminal(c.source, 80),
        when=terminal(c.previous_generated_at, 40) if c.previous_generated_at else "",
        counts=tuple((status, terminal(f"{n} {status}", 30)) for status, n in counts),
        rows=tuple(rows),
        resolved=tuple(resolved),
        resolved_total=len(c.resolved),
        resolved_more=max(0, len(c.resolved) - MAX_LISTED),
    )


def _finding_row(result: AuditResult, row: Fold) -> FindingRow:
    f = row.first
    r = f.resource
    status = None if result.comparison is None else terminal(result.status_of(f), 30)
    others = [terminal(g.resource.ref(), 160) for g in row.findings[1:]]
    kind = terminal(r.kind, 30)
    if row.folded:
        many = kind + "es" if kind.endswith("s") else ""
        kind = plural(len(row.findings), kind, many)
    owner, contact = owner_text([g.owner for g in row.findings])
    return FindingRow(
        rank=row.rank,
        severity=terminal(f.severity.value, 30),
        code=terminal(f.code, 20),
        # The other findings on the same resource: their codes under this one's, their text
        # below.
        related=tuple(
            Related(terminal(g.code, 20), terminal(g.message, 400), terminal(g.recommendation, 400))
            for g in result.related_to(f)
        ),
        ref=terminal(row.pattern(), 160),
        kind=kind,
        node=terminal(r.node, 80) if r.node and r.kind != "Node" and not row.folded else "",
        owner=terminal(owner, 80),
        contact=terminal(contact, 120),
        gpu_hours=num(row.gpu_hours, 1),
        cost=num(row.cost),
        message=terminal(f.message, 500),
        recommendation=terminal(f.recommendation, 500),
        status=status,
        others=tuple(others[:MAX_FOLDED_NAMES]),
        others_more=max(0, len(others) - MAX_FOLDED_NAMES),
    )


_LISTS = (
    (
        Category.RISK,
        "risks",
        "Risks",
        "Most urgent first: severity, then the GPU-hours at risk. Fixing these prevents "
        "failures, or makes GPUs auditable, rather than saving GPU-hours: a sick GPU's hours "
        "are the work at risk on it, an unmonitored GPU's the hours nobody can vouch for.",
    ),
    (
        Category.WASTE,
        "waste",
        "Waste",
        "The most wasted GPU-hours first, then the most cost, then the higher severity; cost is "
        "those GPU-hours at the configured price of each GPU model.",
    ),
)


def _findings(result: AuditResult) -> Findings:
    primaries = result.primaries
    rows = fold(primaries)
    left = MAX_FINDINGS
    tables = []
    for category, sid, title, note in _LISTS:
        part = [r for r in rows if r.first.category is category]
        if not part:
            continue
        shown = part[: max(left, 0)]
        left -= len(shown)
        tables.append(
            FindingList(
                sid=sid,
                title=title,
                note=note,
                findings=sum(1 for f in result.findings if f.category is category),
                rows=tuple(_finding_row(result, r) for r in shown),
                total_rows=len(part),
            )
        )
    return Findings(
        total=len(result.findings),
        lists=tuple(tables),
        rule=ORDER_RULE,
        primaries=len(primaries),
        under=len(result.findings) - len(primaries),
        folded=len(primaries) - len(rows),
        currency=terminal(result.summary.currency, 10),
        gpu_hours=num(result.summary.findings_gpu_hours),
        trend=result.comparison is not None,
    )


def _clusters(result: AuditResult) -> Clusters | None:
    """A scan of every cluster: a row per cluster, then the fleet total (their sums)."""
    rows = cluster_rows(result)
    if not rows:
        return None
    return Clusters(
        label=terminal(result.cluster_label, 60),
        head=CLUSTER_HEAD,
        rows=tuple(
            Row(terminal(name, 80), tuple(terminal(c, 40) for c in cells)) for name, *cells in rows
        ),
    )


def _group_table(
    sid: str, title: str, label: str, key_name: str, groups: tuple[Group, ...], cur: str
) -> GroupTable:
    rows = []
    for g in groups[:MAX_GROUPS]:
        share = g.idle_gpu_hours / g.allocated_gpu_hours if g.allocated_gpu_hours > 0 else None
        width = 0.0 if share is None else max(0.0, min(100.0, share * 100.0))
        rows.append(
            GroupRow(
                key=terminal(g.key, 80),
                allocated=num(g.allocated_gpu_hours),
                idle=num(g.idle_gpu_hours),
                idle_share=pct(share),
                bar_width=num(width, 1, grouped=False),
                activity=pct(g.mean_activity),
                wasted=num(g.wasted_cost),
            )
        )
    return GroupTable(sid, title, label, key_name, tuple(rows), len(groups), cur)


def _breakdown(result: AuditResult) -> tuple[GroupTable, ...]:
    b = result.breakdown
    if b is None:
        return ()
    cur = terminal(result.summary.currency, 10)
    tables = [
        _group_table("by-namespace", "Waste by namespace", "", "Namespace", b.by_namespace, cur)
    ]
    if b.group_label:
        label = terminal(b.group_label, 60)
        tables.append(_group_table("by-label", "Waste by label", label, label, b.by_group, cur))
    return tuple(tables)


def _attribution(result: AuditResult) -> Attribution | None:
    """The attribution ledger: allocated GPU-hours by method, unattributed by reason."""
    rows = attribution_rows(result)
    if not rows:
        return None
    ledger = result.attribution
    return Attribution(
        rows=tuple(
            AttributionRow(
                terminal(side, 20),
                terminal(words, 80),
                terminal(hours_text(value), 30),
                "" if pods is None else terminal(count(pods), 20),
            )
            for side, words, value, pods in rows
        ),
        unknown=terminal(ledger.unknown, 300) if ledger is not None and ledger.unknown else "",
    )


def _causes(result: AuditResult) -> Causes | None:
    """The ledger by cause: the effective GPUs, a bar of the causes and a row per cause."""
    rows = cause_rows(result)
    book = result.causes
    if not rows or book is None:
        return None
    return Causes(
        effective=num(book.effective_gpus, 1),
        allocated=num(book.allocated_gpus, 1),
        chart=_svg(
            charts.cause_chart([(c, w, v) for c, w, v, _ in rows], book.allocated_gpu_hours)
        ),
        rows=tuple((terminal(w, 80), hours_text(v), pct(share)) for _, w, v, share in rows),
        notes=tuple(terminal(f"{c}: {why}", 400) for c, why in sorted(book.not_measured.items())),
    )


def _capacity(result: AuditResult) -> Capacity | None:
    """The capacity plan: its sentences, a chart and a row per GPU product, the queues and
    the assumptions."""
    plan = result.capacity
    if plan is None or not plan.by_product:
        return None
    products = tuple(
        Row(
            terminal(plan.short_names.get(product, product), 80),
            (
                count(p.nodes),
                count(p.nodes_cordoned),
                count(p.nodes_ran_gpu_pods),
                count(p.min_nodes_at_peak),
                stat_text(p.gpus_held),
                stat_text(p.gpus_busy),
                stat_text(p.gpus_activity_unknown),
            ),
        )
        for product, p in plan.by_product.items()
    )
    hint = plan.what_if_hint()
    return Capacity(
        sentences=tuple(terminal(line, 600) for line in plan.headlines()),
        hint=terminal(hint, 300) if hint else "",
        chart=_svg(charts.capacity_chart(plan)),
        products=products,
        notes=tuple(terminal(note, 600) for note in plan.notes),
        release=_after_release(plan) if plan.release_idle else None,
        currency=terminal(plan.currency, 10),
        queues=tuple(_queue_row(u) for u in plan.queues[:MAX_GROUPS]),
        queues_total=len(plan.queues),
        assumptions=tuple(terminal(a, 800) for a in plan.assumptions),
    )


def _after_release(plan: CapacityPlan) -> tuple[Row, ...]:
    """`--what-if release-idle`: per product, the plan after releasing the idle reservations."""
    return tuple(Row(terminal(name, 80), cells) for name, cells in release_rows(plan))


def _queue_row(u: QueueUsage) -> QueueRow:
    return QueueRow(
        queue=terminal(u.queue, 80),
        system=terminal(u.system, 20),
        kind=terminal(u.kind, 20),
        flavor=terminal(u.flavor or "-", 80),
        resource=terminal(u.resource, 60),
        figures=(
            num(u.quota, 1),
            num(u.peak_admitted, 1),
            num(u.peak_use, 1),
            num(u.quota_gpu_hours),
            num(u.admitted_gpu_hours),
            num(u.busy_gpu_hours),
            count(len({(w.namespace, w.name) for w in u.pending})),
        ),
    )


def _waived(result: AuditResult) -> Waived | None:
    if not result.suppressed:
        return None
    return Waived(
        total=len(result.suppressed),
        rows=tuple(
            WaivedRow(
                terminal(s.finding.code, 20),
                terminal(s.finding.resource.ref(), 160),
                num(s.finding.impact.gpu_hours, 1),
                terminal(s.waiver.reason, 300),
                terminal(s.waiver.expires.isoformat()),
            )
            for s in result.suppressed[:MAX_LISTED]
        ),
    )


@dataclass(frozen=True)
class FixRow:
    title: str
    file: str
    findings: str
    saves: str


@dataclass(frozen=True)
class Fixes:
    total: int
    note: str
    rows: tuple[FixRow, ...]


def _fixes(result: AuditResult) -> Fixes | None:
    """The changes `gpuaudit fix` writes, when there are any."""
    rows = fix_rows(result)
    if not rows:
        return None
    return Fixes(
        total=len(rows),
        note=terminal(fix_note(result), 600),
        rows=tuple(
            FixRow(terminal(t, 300), terminal(f, 160), terminal(w, 300), terminal(v, 80))
            for t, f, w, v in rows[:MAX_FIXES]
        ),
    )


def _weeks(result: AuditResult) -> since_last_week.WeeksView | None:
    """The trend over the kept weeks (`--history`), its chart drawn here."""
    view = since_last_week.weeks_view(result)
    if view is None:
        return None
    chart = charts.weeks_chart(view.labels, view.gpu_hours, view.findings)
    return replace(view, svg=_svg(chart))


def _contents(
    findings: Findings, breakdown: tuple[GroupTable, ...], sections: dict[str, object]
) -> tuple[Entry, ...]:
    """The table of contents: the sections the page has (`sections`: id -> its values, None
    or empty when the page leaves it out), in the page's order."""
    entries: list[Entry] = []

    def add(sid: str, title: str) -> None:
        if sections[sid]:
            entries.append(Entry(sid, title))

    add("since", "Since last week")
    add("weeks", "The kept weeks")
    add("attribution", "Attribution of allocated GPU-hours")
    add("causes", "Held GPU-hours by cause")
    add("clusters", "Clusters")
    add("week", "The week")
    add("trend", "Trend")
    entries.extend(Entry(t.sid, f"{t.title} {t.label}".strip()) for t in breakdown)
    sub = tuple(Entry(t.sid, f"{t.title} ({count(t.findings)})") for t in findings.lists)
    entries.append(Entry("findings", f"Findings ({count(findings.total)})", sub))
    add("capacity", "Capacity plan")
    add("showback", "Showback")
    add("fixes", "Changes")
    add("waived", "Waived findings")
    add("skipped", "Skipped checks")
    add("warnings", "Warnings")
    return tuple(entries)


def render(result: AuditResult) -> str:
    """The whole report as one HTML document."""
    findings = _findings(result)
    breakdown = _breakdown(result)
    parts: dict[str, object] = {
        "since": since_last_week.view(result),
        "weeks": _weeks(result),
        "attribution": _attribution(result),
        "causes": _causes(result),
        "clusters": _clusters(result),
        "week": _week(result),
        "trend": _trend(result),
        "capacity": _capacity(result),
        "showback": showback_view(result),
        "fixes": _fixes(result),
        "waived": _waived(result),
        "skipped": tuple((terminal(s.code, 20), terminal(s.reason, 400)) for s in result.skipped),
        "warnings": tuple(terminal(w, 400) for w in result.warnings),
    }
    page = _template().render(
        version=__version__,
        title=terminal(result.cluster or "cluster", 80),
        css=_css(),
        header=_header(result),
        incomplete=_incomplete(result),
        kpis=_kpis(result),
        contents=_contents(findings, breakdown, parts),
        findings=findings,
        breakdown=breakdown,
        checks_run=terminal(", ".join(result.checks_run) or "none", 400),
        **parts,
    )
    # markupsafe writes an escaped quote as `&#39;` or `&#34;`, the standard library (which
    # wrote this page before the templates) as `&#x27;` or `&quot;`: the same characters to
    # any HTML or SVG reader. Keeping the old spelling lets a report be diffed against one
    # an earlier version wrote. No text can spell these references: its `&` is escaped.
    return page.replace("&#39;", "&#x27;").replace("&#34;", "&quot;")


FORMAT = ReportFormat("html", render)
