"""The reports per owner (`--per-owner DIR`): for each owner, one Markdown and one HTML page
with their findings, their GPU-hours and money, their rank among owners by idle GPU-hours and by
efficiency, what is new since the earlier report (`--previous`), and the changes of
`gpuaudit fix` that answer their findings; and an index of the owners.

Each page is made of plain values (`Page`), text from the cluster already made visible
(`terminal()`), then laid out: Markdown escapes every value (`md`), the HTML template escapes
every value (autoescape). File names come from owner names, which are data: `file_stem` keeps
lower-case letters, digits, dots and dashes of the name and adds a short hash of the whole name,
so that two names that read alike never share a file and no name is a path.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache

from jinja2 import Environment, PackageLoader, StrictUndefined, Template

from gpuaudit import __version__
from gpuaudit.audit.assemble import AuditResult
from gpuaudit.audit.owner_rollup import OwnerSection, Rank
from gpuaudit.checks.findings import Finding
from gpuaudit.report.markdown import md
from gpuaudit.report.text import hours_text, money, num, pct, plural, terminal, window_text

MAX_ROWS = 200
"""Findings listed on one owner's page (the JSON report has them all)."""
UNKNOWN_NAME = "unknown owner"
"""How the pages name the findings no owner is named for."""
_UNSAFE = re.compile(r"[^a-z0-9.-]+")


def file_stem(name: str | None) -> str:
    """`owner-ml-platform-3f2a9c1d`: a stable, safe file name for an owner (no extension);
    `owner-unknown` for the findings no owner is named for."""
    if name is None:
        return "owner-unknown"
    slug = _UNSAFE.sub("-", name.lower()).strip("-.")[:60].strip("-.") or "x"
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"owner-{slug}-{digest}"


@dataclass(frozen=True)
class Row:
    """One finding as a page lists it."""

    severity: str
    code: str
    resource: str
    gpu_hours: str
    cost: str
    status: str
    """`new`, `still open`, or empty without an earlier report."""
    message: str
    recommendation: str
    fingerprint: str
    """What `gpuaudit ack` takes to accept it."""


@dataclass(frozen=True)
class ChangeRow:
    title: str
    file: str
    per_week: str


@dataclass(frozen=True)
class Page:
    """One owner's page, every value ready to show."""

    owner: str
    cluster: str
    window: str
    generated: str
    contact: str
    sources: tuple[str, ...]
    usage: str
    """One sentence: the GPU-hours their pods held, idle, cost, efficiency."""
    ranks: str
    """One sentence: their ranks, or why they are not ranked."""
    waste: str
    """One sentence: their findings' counted GPU-hours and cost."""
    since: str
    """One sentence on new and still-open findings; empty without an earlier report."""
    currency: str
    rows: tuple[Row, ...]
    more: int
    """Findings left off the page."""
    waived: tuple[Row, ...]
    changes: tuple[ChangeRow, ...]


def page(result: AuditResult, s: OwnerSection) -> Page:
    """The values of `s`'s page."""
    cur = result.summary.currency
    new, still = set(s.new), set(s.still_open)

    def row(status: str, f: Finding) -> Row:
        r = f.resource
        return Row(
            severity=f.severity.value,
            code=terminal(f.code, 20),
            resource=terminal(f"{r.kind} {r.ref()}", 160),
            gpu_hours=hours_text(f.impact.gpu_hours),
            cost=num(f.impact.cost),
            status=status,
            # An expired waiver's finding says what the waiver said.
            message=terminal(" ".join([f.message, *(f"Before: {h}." for h in f.history)]), 900),
            recommendation=terminal(f.recommendation, 600),
            fingerprint=terminal(f.fingerprint(), 400),
        )

    def split(fp: str) -> str:
        return "new" if fp in new else "still open" if fp in still else ""

    rows = tuple(row(split(f.fingerprint()), f) for f in s.findings[:MAX_ROWS])
    return Page(
        owner=terminal(s.name, 120) if s.name is not None else UNKNOWN_NAME,
        cluster=terminal(result.cluster or "cluster", 120),
        window=window_text(result),
        generated=result.generated_at,
        contact=terminal(s.contact, 254),
        sources=tuple(terminal(x, 200) for x in s.sources[:10]),
        usage=_usage(s, cur),
        ranks=_ranks(s),
        waste=(
            f"Their findings count {hours_text(s.wasted_gpu_hours)} wasted GPU-hours, "
            f"{money(s.wasted_cost, cur)}, over the window "
            f"({plural(len(s.findings), 'finding')}, {len(s.waived):,} waived)."
        ),
        since=(
            f"Since the earlier report: {len(s.new):,} new, {len(s.still_open):,} still open."
            if result.comparison is not None
            else ""
        ),
        currency=terminal(cur, 8),
        rows=rows,
        more=max(0, len(s.findings) - MAX_ROWS),
        waived=tuple(row("waived", w.finding) for w in s.waived[:MAX_ROWS]),
        changes=tuple(
            ChangeRow(
                terminal(c.title, 200),
                terminal(c.file, 200),
                f"{hours_text(c.savings.gpu_hours)} GPU-h, {money(c.savings.cost, cur)}",
            )
            for c in s.changes
        ),
    )


def _usage(s: OwnerSection, cur: str) -> str:
    u = s.usage
    if u is None:
        return "Their pods held no GPU in the window (or nothing names them their owner)."
    return (
        f"Their pods held {hours_text(u.allocated_gpu_hours)} GPU-hours, "
        f"{hours_text(u.idle_gpu_hours)} of them idle ({money(u.wasted_cost, cur)}), at "
        f"{pct(u.mean_activity)} mean engine activity (their efficiency)."
    )


def _place(r: Rank) -> str:
    return f"{r.place:,} of {r.of:,}"


def _ranks(s: OwnerSection) -> str:
    if not s.known:
        return "Not ranked: nothing names an owner of these resources."
    if s.idle_rank is None:
        return "Not ranked: their pods held no GPU in the window."
    eff = (
        f"{_place(s.efficiency_rank)} by efficiency (1 is the least efficient)"
        if s.efficiency_rank is not None
        else "not ranked by efficiency (no activity was measured)"
    )
    return f"Among owners: {_place(s.idle_rank)} by idle GPU-hours (1 is the most idle); {eff}."


# ---- Markdown --------------------------------------------------------------------------------


def markdown(p: Page) -> str:
    """`p` as a Markdown page."""
    out = [
        f"# GPU audit for {md(p.owner, 120)}: {md(p.cluster, 120)}",
        "",
        f"Window {md(p.window)}. Generated {md(p.generated)} by gpuaudit {md(__version__, 40)}.",
        "",
    ]
    if p.contact:
        out += [f"Contact: {md(p.contact, 254)}", ""]
    out += [md(p.usage, 600), "", md(p.ranks, 600), "", md(p.waste, 600), ""]
    if p.since:
        out += [md(p.since, 600), ""]
    out += _md_table("Findings", p.rows, p.currency)
    if p.more:
        out += [f"{p.more:,} more in the JSON report.", ""]
    if p.waived:
        out += _md_table("Waived", p.waived, p.currency)
    out += ["## Changes gpuaudit fix writes for them", ""]
    if p.changes:
        out += ["| Change | File | Saves per week |", "|---|---|---|"]
        out += [f"| {md(c.title)} | {md(c.file)} | {md(c.per_week)} |" for c in p.changes]
    else:
        out.append("None.")
    out.append("")
    if p.sources:
        out += ["## Why these are theirs", ""]
        out += [f"- {md(x)}" for x in p.sources]
        out.append("")
    return "\n".join(out)


def _md_table(title: str, rows: tuple[Row, ...], cur: str) -> list[str]:
    out = [f"## {title} ({len(rows):,})", ""]
    if not rows:
        return [*out, "None.", ""]
    out += [
        f"| # | Severity | Code | Resource | GPU-h | {md(cur, 8)} | Status | "
        "Finding and what to do |",
        "|---:|---|---|---|---:|---:|---|---|",
    ]
    for i, r in enumerate(rows, 1):
        text = (
            f"{md(r.message, 900)} {md(r.recommendation, 600)} "
            f"Fingerprint (for gpuaudit ack): {md(r.fingerprint, 400)}"
        )
        out.append(
            f"| {i} | {md(r.severity)} | {md(r.code)} | {md(r.resource)} | {r.gpu_hours} | "
            f"{r.cost} | {md(r.status)} | {text} |"
        )
    return [*out, ""]


def index_markdown(result: AuditResult, stems: list[tuple[OwnerSection, str]]) -> str:
    """The index of the owners' pages: each owner, their figures and their files."""
    cur = result.summary.currency
    out = [
        f"# GPU audit by owner: {md(result.cluster or 'cluster', 120)}",
        "",
        f"Window {md(window_text(result))}. One page per owner, in Markdown and HTML.",
        "",
        f"| Owner | Findings | Wasted GPU-h | {md(cur, 8)} | Idle rank | Efficiency rank | Pages |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    for s, stem in stems:
        name = md(s.name, 120) if s.name is not None else UNKNOWN_NAME
        idle = _place(s.idle_rank) if s.idle_rank else ""
        eff = _place(s.efficiency_rank) if s.efficiency_rank else ""
        out.append(
            f"| {name} | {len(s.findings):,} | {hours_text(s.wasted_gpu_hours)} | "
            f"{num(s.wasted_cost)} | {idle} | {eff} | [md]({stem}.md), [html]({stem}.html) |"
        )
    return "\n".join([*out, ""])


# ---- HTML ------------------------------------------------------------------------------------


@cache
def _template() -> Template:
    # The stylesheet is included by the template: our own file, not a value, so not escaped.
    loader = PackageLoader("gpuaudit.report", "templates")
    env = Environment(loader=loader, autoescape=True, undefined=StrictUndefined)
    return env.get_template("owner.html.j2")


def html(p: Page) -> str:
    """`p` as a self-contained HTML page (every value escaped by the template)."""
    return _template().render(page=p, version=__version__)
