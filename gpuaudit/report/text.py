"""Text that every report format writes the same way: untrusted text made harmless, numbers,
percentages, money, plurals, the audit window and the trend's figures.

This is the one place that formats numbers for the renderers, so the table, Markdown, HTML and
JUnit reports can never disagree about how a figure reads. Format-specific escaping (`md()` for
Markdown, `h()` for HTML) stays with its format; `terminal()` is the step they all start from.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from gpuaudit.audit.assemble import AuditResult
from gpuaudit.audit.by_cause import rounded
from gpuaudit.audit.capacity import CapacityPlan, Stat
from gpuaudit.audit.summary import Summary
from gpuaudit.core.numbers import json_number
from gpuaudit.fix.changes import short
from gpuaudit.inventory.ownership import Owner
from gpuaudit.inventory.window import iso

MAX_LISTED = 25
"""Waived and resolved findings listed by name in the Markdown and HTML reports."""

DELTA_LABELS: dict[str, str] = {
    "gpus_total": "GPUs",
    "allocation_rate": "Allocation rate",
    "mean_activity": "Mean engine activity",
    "allocated_gpu_hours": "Allocated GPU-hours",
    "idle_gpu_hours": "Idle GPU-hours",
    "wasted_cost": "Wasted cost",
}
"""The summary figures a trend compares, in the order reports show them, with their labels."""

RATES = ("allocation_rate", "mean_activity")
"""Summary figures that are ratios: shown as percentages, their changes in percentage points."""

_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e]")
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode categories that are never shown as themselves: controls (ANSI escapes, newlines),
format characters (every bidi mark and override, U+200E, U+200F, U+061C, U+202A-202E,
U+2066-2069, zero-width characters, tag characters), lone surrogates, and line and paragraph
separators."""
_SHOWN: dict[str, str] = {}


def _visible(match: re.Match[str]) -> str:
    ch = match.group()
    shown = _SHOWN.get(ch)
    if shown is None:
        n = ord(ch)
        if unicodedata.category(ch) not in _HIDDEN:
            shown = ch
        elif n < 0x100:
            shown = f"\\x{n:02x}"
        elif n < 0x10000:
            shown = f"\\u{n:04x}"
        else:
            shown = f"\\U{n:08x}"
        if len(_SHOWN) < 65536:
            _SHOWN[ch] = shown
    return shown


def terminal(text: str, limit: int = 200) -> str:
    """Every control or format character (Unicode categories Cc and Cf: ANSI escapes,
    newlines, every bidi mark, zero-width characters; and lone surrogates and line separators)
    shown as a visible escape (`\\x1b`, `\\u200e`), and very long text cut with an ellipsis.
    Every renderer starts from this; use with `rich.text.Text`, never markup."""
    out = _NOT_PRINTABLE_ASCII.sub(_visible, text)
    if len(out) > limit:
        out = out[: limit - 1] + "…"
    return out


def num(x: float, digits: int = 0, *, sign: bool = False, grouped: bool = True) -> str:
    """A number with `digits` decimals; thousands separators unless `grouped` is false, and a
    leading `+` or `-` when `sign` is true."""
    return format(x, f"{'+' if sign else ''}{',' if grouped else ''}.{digits}f")


def count(n: int) -> str:
    """A whole number with thousands separators."""
    return f"{n:,}"


def pct(x: float | None) -> str:
    """A ratio as a percentage, or `n/a`."""
    return "n/a" if x is None else f"{num(x * 100, 1, grouped=False)} %"


def money(x: float, currency: str) -> str:
    """An amount in whole units of `currency`: `1,234 USD`."""
    return f"{num(x)} {currency}"


def plural(n: int, noun: str, many: str = "") -> str:
    """`1 finding`, `2 findings`, `1,234 findings`; `many` for a noun whose plural is not the
    noun and an `s` (`plural(2, "query", "queries")`)."""
    return f"{count(n)} {noun if n == 1 else (many or noun + 's')}"


def window_bounds(result: AuditResult) -> tuple[str, str]:
    """Start and end of the audit window as the JSON report writes them (RFC 3339, UTC)."""
    return iso(result.window_start), iso(result.window_end)


def window_text(result: AuditResult) -> str:
    """`168 h, 2026-11-16 00:00 to 2026-11-23 00:00 UTC`, and `; narrowed to namespaces a, b`
    after a `--namespace` audit: every report's header says what it covers."""
    start, end = (t.replace("T", " ").removesuffix(":00Z") for t in window_bounds(result))
    return f"{num(result.summary.window_hours, grouped=False)} h, {start} to {end} UTC" + (
        scope_text(result)
    )


def scope_text(result: AuditResult) -> str:
    """`; narrowed to namespaces a, b` (`--namespace`), else empty. The names are valid
    namespace names (checked when the option was read), so safe in every format."""
    if not result.namespaces:
        return ""
    noun = "namespace" if len(result.namespaces) == 1 else "namespaces"
    return f"; narrowed to {noun} {', '.join(result.namespaces)}"


def delta_text(key: str, change: float | None, currency: str) -> str:
    """A summary change with its sign and unit: `+2.5 pp`, `-1,234 USD`."""
    if change is None:
        return "n/a"
    if key in RATES:
        return f"{num(change * 100, 1, sign=True, grouped=False)} pp"
    if key == "wasted_cost":
        return f"{num(change, sign=True)} {currency}"
    return num(change, sign=True)


def value_text(key: str, value: float | None, currency: str) -> str:
    """A summary figure with its unit: `12.5 %`, `1,234 USD`, `1,234`."""
    if value is None:
        return "n/a"
    if key in RATES:
        return pct(value)
    if key == "wasted_cost":
        return money(value, currency)
    return num(value)


def resolved_fields(item: Mapping[str, Any]) -> tuple[str, str, str, float | None]:
    """Code, severity, resource reference and GPU-hours of a resolved finding, read defensively:
    it comes from an earlier report file, which may be anything."""
    res = item.get("resource")
    res = res if isinstance(res, Mapping) else {}
    ns, name = str(res.get("namespace") or ""), str(res.get("name") or "")
    ref = f"{ns}/{name}" if ns else name
    impact = item.get("impact")
    hours = impact.get("gpu_hours") if isinstance(impact, Mapping) else None
    return str(item.get("code") or "?"), str(item.get("severity") or "?"), ref, json_number(hours)


ATTRIBUTION_WORDS = {
    "dcgm_pod_label": "DCGM pod label",
    "shared_split": "shared-GPU split",
    "dra_claim": "DRA claim",
    "kubernetes_join": "Kubernetes-side join",
    "kai_fraction": "KAI fraction",
    "kai_reserved": "KAI reservation, unrequested",
    "hami_share": "HAMi share",
    "no_exporter": "no exporter",
    "no_pod_label": "no pod label",
    "no_limit": "no GPU limit",
    "profiling_absent": "MIG without labels or profiling",
    "time_slicing_without_virtual_gpus": "time-slicing without virtual GPUs",
}
"""The attribution ledger's methods and reasons in words (`gpuaudit.inventory.attribution`)."""


UNKNOWN_OWNER = "unknown"
"""A finding's owner where nothing names one (JSON `findings[].owner.name` null)."""


def owner_text(owners: list[Owner | None]) -> tuple[str, str]:
    """The owner of a findings table's row, (name, contact), plain text the caller escapes (names
    from the cluster are data): `unknown` where nothing names one, `several owners` for a fold
    whose findings' owners differ; the contact (`gpuaudit.io/contact`) is empty where none is."""
    if len(set(owners)) > 1:
        return "several owners", ""
    o = owners[0] if owners else None
    if o is None or o.name is None:
        return UNKNOWN_OWNER, ""
    return o.name, o.contact


def hours_text(x: float) -> str:
    """GPU-hours as a ledger shows them: whole above 10, else to a tenth (`0.4`)."""
    return num(x) if abs(x) >= 10 else num(x, 1)


def attribution_rows(result: AuditResult) -> list[tuple[str, str, float, int | None]]:
    """The attribution ledger's non-zero parts, attributed ones first: (side, words, GPU-hours
    rounded as in the JSON report, pods or None); side is `attributed` or `unattributed`."""
    ledger = result.attribution
    if ledger is None:
        return []
    parts = ledger.rounded()
    out: list[tuple[str, str, float, int | None]] = []
    for (side, name), value in parts.items():
        if value > 0:
            pods = ledger.unattributed_pods.get(name) if side == "unattributed" else None
            out.append((side, ATTRIBUTION_WORDS.get(name, name), value, pods))
    return out


def attribution_sentence(result: AuditResult) -> str:
    """The ledger in one sentence: `Allocated GPU-hours by attribution: 1,200 DCGM pod label,
    48 shared-GPU split; unattributed: 96 no exporter (1 pod).`"""
    rows = attribution_rows(result)
    if not rows:
        return ""
    done = [f"{hours_text(v)} {w}" for side, w, v, _ in rows if side == "attributed"]
    left = [
        f"{hours_text(v)} {w} ({plural(p or 0, 'pod')})"
        for side, w, v, p in rows
        if side != "attributed"
    ]
    text = "Allocated GPU-hours by attribution: " + (", ".join(done) or "none")
    unknown = result.attribution.unknown if result.attribution else ""
    if unknown:
        return f"{text}; unattributed: unknown ({terminal(unknown, 300)})."
    return text + ("; unattributed: " + ", ".join(left) if left else "; none unattributed") + "."


CAUSE_WORDS = {
    "productive": "productive",
    "idle": "idle",
    "stalled": "stalled (busy, no work)",
    "throttled": "lost to throttling",
    "starting": "starting",
    "restarting": "restarting",
    "not_measured": "not measured",
}
"""The ledger by cause's causes in words (`gpuaudit.audit.by_cause`), in the order it lists
them."""


def cause_rows(result: AuditResult) -> list[tuple[str, str, float, float]]:
    """The ledger by cause, fleet-wide: (cause, words, GPU-hours rounded as in the JSON report,
    share of the allocated GPU-hours), every cause."""
    book = result.causes
    if book is None or book.allocated_gpu_hours <= 0:
        return []
    parts = rounded(book.fleet)
    total = sum(parts.values())
    return [(k, CAUSE_WORDS.get(k, k), v, v / total if total else 0.0) for k, v in parts.items()]


def cause_sentence(result: AuditResult) -> str:
    """The ledger by cause in one sentence: `Effective GPUs 84.5 of 116.0 allocated; GPU-hours
    4,055 productive, 1,013 idle, 48 stalled, 449 not measured (throttled not measured).`"""
    rows = cause_rows(result)
    book = result.causes
    if not rows or book is None:
        return ""
    parts = ", ".join(f"{hours_text(v)} {c.replace('_', ' ')}" for c, _, v, _ in rows if v > 0)
    text = (
        f"Effective GPUs {num(book.effective_gpus, 1)} of {num(book.allocated_gpus, 1)} "
        f"allocated; GPU-hours {parts}"
    )
    if book.not_measured:
        text += " (" + ", ".join(sorted(book.not_measured)) + " not measured)"
    return text + "."


CLUSTER_HEAD = (
    "Cluster",
    "GPUs",
    "Allocated on average",
    "Mean activity",
    "Allocated GPU-hours",
    "Idle GPU-hours",
    "Wasted",
    "Findings",
    "Findings GPU-hours",
)
"""The columns of the per-cluster section of a scan of every cluster (`cluster_rows`)."""


def cluster_rows(result: AuditResult) -> list[tuple[str, ...]]:
    """The per-cluster section of a scan of every cluster: one row per cluster (its name as
    the cluster spelled it: escape it for the format), then `fleet total`, whose figures are
    the clusters' sums (mean activity, a weighted mean, is the fleet's). Empty for a scan of
    one cluster."""
    if not result.cluster_label:
        return []
    cur = result.summary.currency

    def row(name: str, s: Summary, findings: int) -> tuple[str, ...]:
        return (
            name,
            count(s.gpus_total),
            f"{num(s.gpus_allocated_avg, 1)} ({pct(s.allocation_rate)})",
            pct(s.mean_activity),
            num(s.allocated_gpu_hours),
            num(s.idle_gpu_hours),
            money(s.wasted_cost, cur),
            count(findings),
            num(s.findings_gpu_hours),
        )

    rows = [row(c.name, c.summary, c.findings) for c in result.clusters]
    rows.append(row("fleet total", result.summary, len(result.findings)))
    return rows


def stat_text(s: Stat) -> str:
    """A capacity statistic as the reports show it: peak / p95 / mean, one decimal each."""
    return f"{num(s.peak, 1)} / {num(s.p95, 1)} / {num(s.mean, 1)}"


def release_rows(plan: CapacityPlan) -> list[tuple[str, tuple[str, ...]]]:
    """`--what-if release-idle`, per GPU product: its short name (untrusted text: each format
    makes it safe its own way) and the formatted cells released, fewest nodes at the peak before
    and after, nodes, GPUs and cost freed, GPUs held after."""
    rows: list[tuple[str, tuple[str, ...]]] = []
    for product, p in plan.by_product.items():
        a = plan.after_release_idle.get(product, p)
        f = plan.freed.get(product)
        cells = (
            count(plan.released_by_product.get(product, 0)),
            count(p.min_nodes_at_peak),
            count(a.min_nodes_at_peak),
            count(f.nodes if f else 0),
            num(f.gpus if f else 0.0, 1),
            num(f.cost if f else 0.0),
            stat_text(a.gpus_held),
        )
        rows.append((plan.short_names.get(product, product), cells))
    return rows


FIX_COMMAND = "gpuaudit fix --output DIR"
"""The command that writes the changes the reports list (with the scan's source options)."""


def fix_rows(result: AuditResult) -> list[tuple[str, str, str, str]]:
    """Each change `gpuaudit fix` writes for the audit: what it does, its file, the findings it
    answers (code and short fingerprint) and what it saves per week (untrusted text: each
    format makes it safe its own way)."""
    rows = []
    for c in result.fixes.changes:
        found = ", ".join(f"{f.code} {short(f)}" for f in c.findings)
        s = c.savings
        saves = f"{num(s.gpu_hours, 1)} GPU-h, {money(s.cost, s.currency)}"
        rows.append((c.title, c.file, found, saves))
    return rows


def fix_note(result: AuditResult) -> str:
    """One sentence on the changes: how many, how they were checked, how many findings of
    fixable checks got none."""
    plan = result.fixes
    none = sum(1 for v in plan.fixes.values() if v.kind is None)
    tail = (
        f"; {plural(none, 'finding')} of those checks got none (the JSON report and the "
        "folder's README say why)"
    )
    return (
        f"{FIX_COMMAND} writes {plural(len(plan.changes), 'change')} to review"
        f"{tail if none else ''}. Each patch was applied to the object as read and validated "
        f"against {plan.schema or 'the Kubernetes schema'}."
    )
