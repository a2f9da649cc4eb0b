"""The terminal report: a short fleet summary, the findings in two ranked tables that fit the
terminal's width (the risks, most urgent first, then the waste, the most wasted GPU-hours
first: the audit's one order, `gpuaudit.checks.findings.rank`), then the full message and
recommendation of the top rows of each.

At 80 columns a finding takes one to three lines: rank, severity, code, the resource (GPU UUIDs
cut to `GPU-f0f63307…`, long names broken at their dashes), GPU-hours, cost and the check's title.
Alike findings fold into one row with their count and sums (`gpuaudit.report.fold`); `--all`
lists every one. The header says what the table leaves out: waived findings, skipped checks,
an incomplete audit. Every line is cut to the width and has no trailing spaces, so the text
reads the same in a terminal, a pager, a file and a diff.
"""

from __future__ import annotations

import io
import re
import textwrap
from collections.abc import Iterable, Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuaudit.audit.assemble import AuditResult
from gpuaudit.audit.capacity import Stat
from gpuaudit.checks import discover
from gpuaudit.checks.findings import ORDER_RULE, Category
from gpuaudit.fix.changes import key as fix_key
from gpuaudit.report import since_last_week
from gpuaudit.report.fold import Row, fold
from gpuaudit.report.renderer import ReportFormat
from gpuaudit.report.showback_text import showback_sentence
from gpuaudit.report.text import (
    attribution_sentence,
    cause_sentence,
    cluster_rows,
    count,
    money,
    num,
    pct,
    plural,
    terminal,
    window_text,
)

TOP_DETAILS = 5
"""Waste rows whose findings are written out in full after the tables (every row with
`--all`)."""
TOP_RISKS = 3
"""Risk rows written out in full after the tables, before the waste rows."""
INDENT = 4
"""Indent of a detail's message and recommendation."""
FILE_WIDTH = 160
"""Width of the table written to `--output`."""

_UNITS = re.compile(r"(\d) (%|h|GPU-hours|GPU-h|GPUs?|GiB|[A-Z]{3})(?=\W|$)")
"""A figure and its unit, kept on one line when text is wrapped."""
_UUID = re.compile(
    r"\b((?:GPU|MIG)-)?([0-9a-fA-F]{8})-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)


def print_table(result: AuditResult, console: Console, *, every: bool = False) -> None:
    """Print the report to `console`, as wide as it is, in its colours; `every` lists every
    finding unfolded and in full (`--all`)."""
    for line in report_lines(result, console, every=every):
        console.print(line, soft_wrap=True)


def table_text(result: AuditResult, width: int = FILE_WIDTH, *, every: bool = False) -> str:
    """The report as plain text `width` columns wide, without colour or terminal codes: what
    `--output` writes for the table format."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, no_color=True, force_terminal=False, highlight=False)
    print_table(result, console, every=every)
    return buf.getvalue()


def report_lines(result: AuditResult, console: Console, *, every: bool = False) -> list[Text]:
    """Every line of the report at the console's width, none longer and none ending in a
    space."""
    width = max(console.width, 40)
    # One row per resource: a finding's related findings on the same resource are named
    # under it (the coherence pass chose the primary one).
    rows = fold(result.primaries, every)
    fixable = _fixable(result)
    lines = header(result, rows, width)
    lines += _since(result, width)
    lines += _clusters(result, width)
    lines += _block(capacity_text(result), width)
    if rows:
        lines.append(Text())
        lines += _flow([_table_title(result, rows)], width)
        cur = result.summary.currency
        for title, part in _parts(result, rows):
            lines += [Text(), *_flow([Text(title, style="bold")], width)]
            lines += table_lines(part, cur, console, width, sized_by=rows, fixable=fixable)
        lines.append(Text())
        lines += details(_detailed(rows, every), len(rows), cur, width, every)
    else:
        lines += [Text(), Text("No findings.", style="green")]
    lines += _waived(result, width) + _skipped(result, width) + _warnings(result, width)
    lines += _block(assumptions_text(result), width)
    return [_fit(line, width) for line in lines]


def _block(text: Text | None, width: int) -> list[Text]:
    """A multi-line block (the capacity plan), each line wrapped at `width`; the continuation
    lines of a heading line (indent two at most) indented two more, of a numbered one past its
    number, of a paragraph (indent four or more) as much as its first line."""
    if text is None:
        return []
    out: list[Text] = []
    for part in text.split("\n"):
        plain = part.plain
        indent = len(plain) - len(plain.lstrip(" "))
        number = re.match(r"\d+\. ", plain[indent:])
        hang = indent + (len(number.group()) if number else 2 if indent <= 2 else 0)
        out += _wrap_text(part, width, hang) if plain.strip() else [Text()]
    while out and not out[-1].plain:
        out.pop()
    return out


# -- the header


def header(result: AuditResult, rows: Sequence[Row], width: int) -> list[Text]:
    """Cluster and window; the fleet's figures; what the table holds and what it leaves out."""
    s = result.summary
    cluster = terminal(result.cluster) or "cluster"
    lines = _flow([Text(f"gpuaudit: {cluster}", style="bold"), Text(window_text(result))], width)
    lines += _flow(
        [
            Text(plural(s.gpus_total, "GPU"), style="bold"),
            Text(f"allocated now {num(s.gpus_allocated_now, 1)}"),
            Text(f"on average {num(s.gpus_allocated_avg, 1)} ({pct(s.allocation_rate)})"),
            Text(f"mean engine activity {pct(s.mean_activity)}"),
        ],
        width,
    )
    lines += _flow(
        [
            Text(
                f"idle GPU-hours {num(s.idle_gpu_hours)} of {num(s.allocated_gpu_hours)} allocated"
            ),
            Text(f"wasted {money(s.wasted_cost, s.currency)}"),
        ],
        width,
    )
    ledger = attribution_sentence(result)
    if ledger:
        lines += _wrap(ledger, width, 0)
    costs = showback_sentence(result)
    if costs:
        lines += _wrap(costs, width, 0)
    causes = cause_sentence(result)
    if causes:
        lines += _wrap(causes, width, 0)
    lines += _flow(_status(result, rows), width)
    if not result.complete:
        why = "; ".join(result.incomplete_reasons) or "some data is missing"
        lines += _wrap("INCOMPLETE: " + terminal(why, 2000), width, 0, "bold red")
    return lines


def _clusters(result: AuditResult, width: int) -> list[Text]:
    """A scan of every cluster: one line per cluster with its figures, then the fleet total
    (the clusters' sums)."""
    rows = cluster_rows(result)
    if not rows:
        return []
    label = terminal(result.cluster_label, 60)
    lines = [Text(), Text(f"Clusters by {label}:", style="bold")]
    for i, (name, gpus, avg, act, alloc, idle, wasted, found, found_h) in enumerate(rows):
        total = i == len(rows) - 1
        lines += _flow(
            [
                Text(f"  {terminal(name, 80)}: {gpus} GPUs", style="bold" if total else ""),
                Text(f"on average {avg} allocated"),
                Text(f"activity {act}"),
                Text(f"idle GPU-hours {idle} of {alloc}"),
                Text(f"wasted {wasted}"),
                Text(f"{found} findings ({found_h} GPU-hours)"),
            ],
            width,
        )
    return lines


def _status(result: AuditResult, rows: Sequence[Row]) -> list[Text]:
    n = len(result.findings)
    found = plural(n, "finding")
    if len(rows) < n:
        found += f" in {plural(len(rows), 'row')}"
    parts = [Text(found, style="bold")]
    parts.append(Text(f"{count(len(result.suppressed))} waived"))
    checks = plural(len(result.checks_run) + len(result.skipped), "check")
    skipped = f"{count(len(result.skipped))} of {checks} skipped"
    parts.append(Text(skipped, style="yellow" if result.skipped else ""))
    if result.complete:
        parts.append(Text("data complete"))
    else:
        parts.append(Text("data INCOMPLETE", style="bold red"))
    if result.warnings:
        parts.append(Text(plural(len(result.warnings), "warning"), style="yellow"))
    return parts


def _fixable(result: AuditResult) -> frozenset[str]:
    """The keys of the findings `gpuaudit fix` writes a change for (`FIX_MARK` marks them)."""
    return frozenset(k for k, v in result.fixes.fixes.items() if v.kind is not None)


FIX_MARK = "+"
"""Beside the code of a row `gpuaudit fix` writes a change for."""


def _table_title(result: AuditResult, rows: Sequence[Row]) -> Text:
    title = f"{plural(len(result.findings), 'finding')}, {ORDER_RULE}"
    under = len(result.findings) - len(result.primaries)
    if under:
        title += f" ({count(under)} shown under another on the same resource)"
    if len(rows) < len(result.primaries):
        title += "; alike ones folded into one row (--all lists each)"
    if any(fix_key(r.first) in _fixable(result) for r in rows):
        title += f"; {FIX_MARK} marks a row gpuaudit fix writes a change for"
    return Text(title, style="bold")


def _parts(result: AuditResult, rows: Sequence[Row]) -> list[tuple[str, list[Row]]]:
    """The rows of each list that has any, with the list's title: the risks, then the waste
    (the rows come in that order; nothing is re-sorted)."""
    out = []
    for category, title in _LIST_TITLES:
        part = [r for r in rows if r.first.category is category]
        if part:
            # Those shown under another finding on the same resource included.
            n = sum(1 for f in result.findings if f.category is category)
            found = plural(n, "finding") + (f" in {plural(len(part), 'row')}" if n > 1 else "")
            out.append((title.format(found=found), part))
    return out


_LIST_TITLES = (
    (
        Category.RISK,
        "Risks ({found}), most urgent first: fixing them prevents failures or makes GPUs "
        "auditable rather than saving GPU-hours",
    ),
    (Category.WASTE, "Waste ({found}), the most wasted GPU-hours first"),
)


def _detailed(rows: Sequence[Row], every: bool) -> list[Row]:
    """The rows written out in full: every one with `--all`; else the first `TOP_RISKS` risks
    and the top `TOP_DETAILS` waste rows."""
    if every:
        return list(rows)
    risks = [r for r in rows if r.first.category is Category.RISK]
    waste = [r for r in rows if r.first.category is Category.WASTE]
    return risks[:TOP_RISKS] + waste[:TOP_DETAILS]


# -- the table


def table_lines(
    rows: Sequence[Row],
    currency: str,
    console: Console,
    width: int,
    *,
    sized_by: Sequence[Row] = (),
    fixable: frozenset[str] = frozenset(),
) -> list[Text]:
    """The ranked table, its columns sized to `width` and to the rows of `sized_by` (default
    `rows`), so that the tables of the risks and of the waste line up. A row whose finding's
    key is in `fixable` has `FIX_MARK` beside its code."""
    titles = {c.code: c.title for c in discover()}
    sizing = sized_by or rows
    hours = [num(r.gpu_hours, 1) for r in rows]
    costs = [num(r.cost) for r in rows]
    w_rank = max(1, *(len(str(r.rank)) for r in sizing))
    w_hours = max(len("GPU-h"), *(len(num(r.gpu_hours, 1)) for r in sizing))
    w_cost = max(len(currency), *(len(num(r.cost)) for r in sizing))
    marked = any(fix_key(r.first) in fixable for r in sizing)
    w_code = len("GPU000") + (len(FIX_MARK) if marked else 0)
    fixed = w_rank + len("critical") + w_code + w_hours + w_cost + 2 * 6
    room = max(width - fixed, 20)
    names = [terminal(titles.get(r.first.code, r.first.code), 80) for r in rows]
    all_names = [terminal(titles.get(r.first.code, r.first.code), 80) for r in sizing]
    w_title = _title_width(sizing, all_names, room)
    # No wider than the longest resource needs: a wide terminal gets a compact table.
    w_res = min(room - w_title, max(len(line) for r in sizing for line in resource_cell(r, room)))
    t = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1, 0, 0),  # with the column divider: two spaces between columns
        expand=False,
        header_style="bold",
    )
    t.add_column("#", justify="right", width=w_rank, no_wrap=True)
    t.add_column("Severity", width=len("critical"), no_wrap=True)
    t.add_column("Code", width=w_code, no_wrap=True)
    t.add_column("Resource", width=w_res, overflow="fold")
    t.add_column("GPU-h", justify="right", width=w_hours, no_wrap=True)
    t.add_column(terminal(currency, 8), justify="right", width=w_cost, no_wrap=True)
    t.add_column("Check", width=w_title, overflow="fold")
    for row, h, c, name in zip(rows, hours, costs, names, strict=True):
        f = row.first
        t.add_row(
            Text(str(row.rank), style="dim"),
            Text(f.severity.value, style=f.severity.colour),
            Text(f.code + (FIX_MARK if fix_key(f) in fixable else ""), style="bold"),
            Text("\n".join(resource_cell(row, w_res))),
            Text(h),
            Text(c),
            Text(name),
        )
    options = console.options.update(width=width)
    out = []
    for segments in console.render_lines(t, options, pad=False):
        line = Text()
        for s in segments:
            if not s.control:
                line.append(s.text, s.style)
        line.rstrip()
        out.append(line)
    return out


def _title_width(rows: Sequence[Row], names: Sequence[str], room: int) -> int:
    """The width of the check's title that makes the table shortest when the resource has
    the rest of `room` (the wider title on a tie)."""
    longest = max(map(len, names))
    best, width = None, longest
    for w in range(min(longest, room - 12), min(10, longest) - 1, -1):
        total = sum(
            max(len(resource_cell(r, room - w)), len(textwrap.wrap(n, w)))
            for r, n in zip(rows, names, strict=True)
        )
        if best is None or total < best:
            best, width = total, w
    return max(width, 1)


def resource_cell(row: Row, width: int) -> list[str]:
    """At most three lines of `width` naming the row's resource: a GPU UUID cut to its first
    block, long names broken after a `-`, `/` or `.`; a fold's pattern and its count."""
    if row.folded:
        kind = row.first.resource.kind
        noun = plural(len(row.findings), kind, kind + "es" if kind.endswith("s") else "")
        return break_name(terminal(row.pattern(), 300), width, 2) + [noun]
    return break_name(short_ids(terminal(row.first.resource.ref(), 300)), width, 3)


def short_ids(text: str) -> str:
    """GPU and MIG UUIDs cut to their first block: `GPU-f0f63307…`."""
    return _UUID.sub(lambda m: f"{m.group(1) or ''}{m.group(2)}…", text)


def break_name(name: str, width: int, most: int) -> list[str]:
    """`name` in lines of at most `width`, broken after a `-`, `/`, `.` or `_` where one is
    in the second half of the line, else where the line is full; at most `most` lines, the
    middle of a longer name left out (`…`)."""
    width = max(width, 4)
    if len(name) > width * most:
        keep = width * most - 1
        head = keep * 2 // 3
        name = name[:head] + "…" + name[len(name) - (keep - head) :]
    ns, slash, rest = name.partition("/")
    if len(name) > width and slash and len(ns) < width and len(rest) <= width and most > 1:
        return [ns + slash, rest]  # the namespace on one line, the name whole on the next
    lines: list[str] = []
    while len(name) > width:
        cuts = [i + 1 for i, ch in enumerate(name[:width]) if ch in "-/._" and i >= width // 2]
        # The last separator that leaves more than a scrap for the next line.
        fair = [c for c in cuts if len(name) - c >= 3] or cuts
        cut = fair[-1] if fair else width
        lines.append(name[:cut])
        name = name[cut:]
    lines.append(name)
    return lines[:most]


# -- the findings in full


def details(rows: Sequence[Row], total: int, currency: str, width: int, every: bool) -> list[Text]:
    """The message and recommendation of each of `rows`, wrapped at `width`."""
    titles = {c.code: c.title for c in discover()}
    risks = sum(1 for r in rows if r.first.category is Category.RISK)
    waste = len(rows) - risks
    parts = [plural(risks, "risk row")] if risks else []
    parts += [f"the top {plural(waste, 'waste row')}"] if waste else []
    head = "Every finding in full" if every else f"The first {' and '.join(parts)} in full"
    lines = [Text(head, style="bold")]
    for row in rows:
        lines.append(Text())
        lines += _detail(row, titles.get(row.first.code, row.first.code), currency, width)
    if not every and total > len(rows):
        lines.append(Text())
        lines += _wrap(
            f"The other {plural(total - len(rows), 'row')} of the tables: `--all` writes every "
            "finding out in full, as do `--format markdown` and `--format html`; "
            "`gpuaudit explain CODE` gives a check's rule.",
            width,
            0,
            "dim",
        )
    return lines


def _detail(row: Row, title: str, currency: str, width: int) -> list[Text]:
    f = row.first
    head = Text(f"#{row.rank} ", style="bold")
    head.append(f.severity.value, style=f.severity.colour)
    head.append(f" {f.code} ", style="bold")
    head.append(f"{terminal(title, 80)}: {num(row.gpu_hours, 1)} GPU-h, ")
    head.append(money(row.cost, currency))
    if row.folded:
        head.append(f", {plural(len(row.findings), 'finding')}")
    lines = _wrap_text(head, width, INDENT)
    lines += _wrap(terminal(f.message, 2000), width, INDENT)
    lines += _wrap("-> " + terminal(f.recommendation, 2000), width, INDENT, "green", hang=3)
    if f.related:
        lines += _wrap(
            f"Also on this resource: {', '.join(f.related)} "
            f"({'its message is' if len(f.related) == 1 else 'their messages are'} in the "
            "JSON, Markdown and HTML reports).",
            width,
            INDENT,
            "dim",
        )
    if row.folded:
        others = ", ".join(terminal(x.resource.ref(), 200) for x in row.findings[1:])
        lines += _wrap(
            f"The same for {count(len(row.findings) - 1)} more like it, each with its own "
            f"names and figures: {others}.",
            width,
            INDENT,
            "dim",
            most=4,
        )
    return lines


# -- what the table leaves out


def _since(result: AuditResult, width: int) -> list[Text]:
    """What last week's findings became (`--previous`, `--history`), before the findings: the
    sentence, then each fixed finding with how it was judged fixed."""
    said = since_last_week.sentence(result)
    if not said:
        return []
    lines = [Text(), Text("Since last week", style="bold"), *_wrap(said, width, 0, hang=2)]
    for code, ref, how, hours, cost, why in since_last_week.fixed_rows(result):
        text = f"fixed ({how}): {code} {ref}, {hours} GPU-h and {cost} a week. {why}"
        lines += _wrap(text, width, 2, "green", hang=2)
    hidden = since_last_week.more(result)[0]
    if hidden:
        lines.append(Text(f"  …and {hidden} more fixed in the JSON report."))
    return lines


def _waived(result: AuditResult, width: int) -> list[Text]:
    if not result.suppressed:
        return []
    by: dict[tuple[str, str, str], int] = {}
    for s in result.suppressed:
        key = (s.waiver.describe(), s.waiver.reason, s.waiver.expires.isoformat())
        by[key] = by.get(key, 0) + 1
    lines = [Text(), Text(f"Waived ({plural(len(result.suppressed), 'finding')}):", style="bold")]
    for (who, reason, expires), n in by.items():
        lines += _wrap(
            f"{terminal(who)}: {plural(n, 'finding')}, until {expires}: {terminal(reason, 400)}",
            width,
            2,
        )
    return lines


def _skipped(result: AuditResult, width: int) -> list[Text]:
    if not result.skipped:
        return []
    lines = [Text(), Text("Skipped checks (their data is missing):", style="yellow")]
    for s in result.skipped:
        lines += _wrap(f"{s.code}: {terminal(s.reason, 600)}", width, 2)
    return lines


def _warnings(result: AuditResult, width: int) -> list[Text]:
    if not result.warnings:
        return []
    lines = [Text(), Text("Warnings:", style="yellow")]
    for msg in result.warnings:
        lines += _wrap(terminal(msg, 600), width, 2)
    return lines


# -- lines


def _flow(parts: Iterable[Text], width: int, sep: str = ", ") -> list[Text]:
    """Phrases joined by `sep`, a line broken only between two phrases (a phrase longer than a
    line is wrapped on its own); continuation lines indented by two."""
    lines: list[Text] = []
    cur = Text()
    for part in parts:
        if not part.plain:
            continue
        joined = len(cur.plain) + len(sep) + len(part.plain)
        if cur.plain and joined <= width:
            cur.append(sep)
            cur.append_text(part)
            continue
        if cur.plain:
            lines.append(cur)
        indent = 2 if lines else 0
        if indent + len(part.plain) > width:
            wrapped = _wrap_text(part, width, indent)
            lines += [*wrapped[:-1]]
            cur = wrapped[-1]
        else:
            cur = Text(" " * indent)
            cur.append_text(part)
    if cur.plain.strip():
        lines.append(cur)
    return lines


def _wrap(
    text: str,
    width: int,
    indent: int,
    style: str = "",
    *,
    hang: int = 0,
    most: int = 0,
) -> list[Text]:
    """`text` wrapped at `width` with every line indented by `indent` (lines after the first
    by `hang` more); at most `most` lines when given, the last ending in `…`."""
    lines = textwrap.wrap(
        _UNITS.sub("\\1\u00a0\\2", text),
        width=max(width - indent, 10),
        subsequent_indent=" " * hang,
        break_on_hyphens=False,
    ) or [""]
    lines = [line.replace("\u00a0", " ") for line in lines]
    if most and len(lines) > most:
        lines = lines[:most]
        lines[-1] = lines[-1][: max(width - indent - 1, 1)].rstrip() + "…"
    return [Text(" " * indent + line, style=style) for line in lines]


def _wrap_text(text: Text, width: int, indent: int) -> list[Text]:
    """A styled line wrapped like `_wrap`, keeping its styles (first line not indented)."""
    plain = text.plain
    pieces = textwrap.wrap(plain, width=max(width - indent, 10), break_on_hyphens=False) or [""]
    out: list[Text] = []
    pos = 0
    for i, piece in enumerate(pieces):
        start = plain.find(piece, pos)
        part = text[start : start + len(piece)]
        pos = start + len(piece)
        line = Text(" " * (indent if i else 0))
        line.append_text(part)
        out.append(line)
    return out


def _fit(line: Text, width: int) -> Text:
    """The line cut to `width`, without trailing spaces."""
    if len(line.plain) > width:
        line = line[:width]
    line.rstrip()
    return line


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
        t.append(f"held {_capacity_stat(p.gpus_held)}; busy {_capacity_stat(p.gpus_busy)}")
        if p.gpus_activity_unknown.peak > 0:
            t.append(f"; activity unknown {_capacity_stat(p.gpus_activity_unknown)}")
        t.append(f"\n    {terminal(line, 400)}\n")
    for note in plan.notes:
        t.append(f"  {terminal(note, 600)}\n")
    hint = plan.what_if_hint()
    if hint:
        t.append(f"  {hint}\n", style="dim")
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
    t = Text("\nCapacity plan assumptions:\n", style="dim")
    for i, a in enumerate(plan.assumptions, 1):
        t.append(f"  {i}. {a}\n", style="dim")
    return t


FORMAT = ReportFormat("table", table_text)
