"""The Markdown report through the CLI: sections, order, trend, groups, and hostile names."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from gpuaudit.audit.compare import load_report
from gpuaudit.audit.waivers import Waiver
from gpuaudit.checks.findings import Skipped
from gpuaudit.cli import app
from gpuaudit.inventory.ownership import Owner
from gpuaudit.report import markdown
from gpuaudit.report.text import terminal
from tests.support.reports import (
    HOSTILE,
    HOSTILE_CLUSTER,
    RESOLVED_NAME,
    demo_result,
    previous_report,
    with_owners,
    write_hostile_snapshot,
)

runner = CliRunner()


def _scan(*args: str) -> str:
    res = runner.invoke(app, ["scan", "-q", *args])
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture(scope="module")
def demo_json(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("json") / "demo.json"
    _scan("--demo", "--format", "json", "--output", str(out))
    doc: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return doc


@pytest.fixture(scope="module")
def previous_file(tmp_path_factory: pytest.TempPathFactory, demo_json: dict[str, Any]) -> Path:
    path = tmp_path_factory.mktemp("prev") / "last-week.json"
    path.write_text(json.dumps(previous_report(demo_json)), encoding="utf-8")
    return path


def _parse(text: str) -> list[Any]:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(text)


def _tables(text: str) -> list[list[list[str]]]:
    """Every table as rows of cell texts, as a CommonMark renderer reads them."""
    tables: list[list[list[str]]] = []
    row: list[str] | None = None
    cell = False
    for tok in _parse(text):
        if tok.type == "table_open":
            tables.append([])
        elif tok.type == "tr_open":
            row = []
        elif tok.type == "tr_close" and row is not None:
            tables[-1].append(row)
        elif tok.type in ("th_open", "td_open"):
            cell = True
        elif tok.type in ("th_close", "td_close"):
            cell = False
        elif tok.type == "inline" and cell and row is not None:
            row.append("".join(c.content for c in tok.children or []))
    return tables


def test_demo_report_has_every_section_in_ranked_order(demo_json: dict[str, Any]) -> None:
    out = _scan("--demo", "--format", "markdown")
    n = len(demo_json["findings"])
    assert out.startswith("# GPU audit: scenario-1\n")
    assert "Window 168 h, 2026-11-16 00:00 to 2026-11-23 00:00 UTC" in out
    rule = "ranked by wasted GPU-hours; risks listed apart"
    for heading in ("## Fleet summary", f"## Findings ({n}, {rule})", "## Waste by namespace"):
        assert heading in out
    risks = sum(1 for f in demo_json["findings"] if f["category"] == "risk")
    assert out.index(f"### Risks ({risks} findings on ") < out.index(f"### Waste ({n - risks} ")
    s = demo_json["summary"]
    assert f"| GPUs | {s['gpus_total']:,} |" in out
    assert f"| Wasted cost | {s['wasted_cost']:,.0f} USD |" in out
    assert "INCOMPLETE" not in out and "## Trend" not in out and "Waste by label" not in out
    tables = _tables(out)
    risk_table, waste_table = [
        t for t in tables if t[0][:4] == ["#", "Severity", "Code", "Resource"]
    ]
    findings = [*risk_table, *waste_table[1:]]
    assert (
        findings[0]
        == waste_table[0]
        == [
            "#",
            "Severity",
            "Code",
            "Resource",
            "Owner",
            "GPU-h",
            "USD",
            "Finding",
            "Recommendation",
        ]
    )
    # The report keeps the audit's one order; it never re-sorts.
    refs = [row[3] for row in findings[1:]]
    rows = [f for f in demo_json["findings"] if f["primary"]]
    expected = [f"{f['resource']['namespace']}/{f['resource']['name']}".lstrip("/") for f in rows]
    assert refs == expected[: len(refs)] and len(refs) == min(len(expected), markdown.MAX_FINDINGS)
    # A resource with several findings is one row, the others' codes beside its code.
    # (notebooks/nb-idle-0-0 is such a resource too, but ranks below the first MAX_FINDINGS.)
    idle = next(row for row in findings[1:] if row[3] == "research/dra-idle-0")
    assert idle[2] == "GPU001 +GPU021"
    assert "GPU021: Pod research/dra-idle-0 held a whole" in idle[7]
    assert f"Together they count {demo_json['summary']['findings_gpu_hours']:,.0f} GPU-hours" in out
    first = demo_json["findings"][0]["impact"]
    assert findings[1][5:7] == [f"{first['gpu_hours']:,.1f}", f"{first['cost']:,.0f}"]
    assert all(len(row) == 9 for row in findings)
    # Each row names its finding's owner (JSON `findings[].owner`), with the contact where given.
    owners = [f["owner"] for f in rows[: len(refs)]]
    assert [row[4] for row in findings[1:]] == [
        (o["name"] or "unknown") + (f" ({o['contact']})" if o["contact"] else "") for o in owners
    ]
    # The ranks go on from one table to the next; the waste, most wasted GPU-hours first.
    assert [int(row[0]) for row in findings[1:]] == list(range(1, len(findings)))
    hours = [float(row[5].replace(",", "")) for row in waste_table[1:]]
    assert hours == sorted(hours, reverse=True) and waste_table[1][3] == "vision-reserved"


def test_group_by_label_table() -> None:
    out = _scan("--demo", "--format", "markdown", "--group-by-label", "app")
    groups = json.loads(_scan("--demo", "--format", "json", "--group-by-label", "app"))[
        "breakdown"
    ]["by_group"]
    assert "## Waste by label app" in out
    table = next(t for t in _tables(out) if t[0][0] == "app")
    assert table[0] == [
        "app",
        "Allocated GPU-h",
        "Idle GPU-h",
        "Idle share",
        "Wasted USD",
        "Activity",
    ]
    # The breakdown's order and figures, cut at 25 rows.
    assert [row[0] for row in table[1:]] == [g["key"] for g in groups[:25]]
    g = groups[1]
    share = g["idle_gpu_hours"] / g["allocated_gpu_hours"] * 100
    assert table[2][1:5] == [
        f"{g['allocated_gpu_hours']:,.0f}",
        f"{g['idle_gpu_hours']:,.0f}",
        f"{share:.1f} %",
        f"{g['wasted_cost']:,.0f}",
    ]
    assert f"The first 25 of {len(groups)}" in out


def test_trend_against_previous_report(previous_file: Path, demo_json: dict[str, Any]) -> None:
    out = _scan("--demo", "--format", "markdown", "--previous", str(previous_file))
    unchanged = len(demo_json["findings"]) - 3
    assert "## Trend since last-week.json, generated 2026-11-16T06:00:00Z" in out
    assert f"**1** new, **1** worse, **1** improved, {unchanged} unchanged, **1** resolved." in out
    cost = demo_json["summary"]["wasted_cost"]
    assert f"| Wasted cost | {cost + 1000:,.0f} USD | {cost:,.0f} USD | -1,000 USD |" in out
    tables = _tables(out)
    findings = [row for t in tables if t[0][:2] == ["#", "Severity"] for row in t]
    assert findings[0][-1] == "Trend"
    statuses = [row[-1] for row in findings if row[-1] not in ("Trend", "unchanged")]
    assert statuses == ["new", "improved", "worse"]
    resolved = next(t for t in tables if t[0][0] == "Code")
    assert resolved[1][2] == f"old/{RESOLVED_NAME}"  # literal, not a tag or code span


def test_incomplete_waived_and_skipped_sections() -> None:
    waiver = Waiver("GPU003", "nightly batch accepted", date(2099, 1, 1), namespace="batch")
    result = demo_result(waivers=(waiver,))
    result = dataclasses.replace(
        result,
        complete=False,
        incomplete_reasons=("Kubernetes pods: forbidden <b>x</b>",),
        warnings=("a *warning*",),
    )
    out = markdown.render(result)
    assert "> **INCOMPLETE:**" in out
    assert "> - Kubernetes pods: forbidden &lt;b&gt;x&lt;/b&gt;" in out
    n = len(result.suppressed)
    assert n > 0 and all(s.finding.code == "GPU003" for s in result.suppressed)
    assert f"## Waived findings ({n})" in out
    assert "nightly batch accepted | 2099-01-01 |" in out
    assert f"## Findings ({len(result.findings)}, ranked by wasted GPU-hours; risks" in out
    assert "## Warnings\n\n- a \\*warning\\*" in out
    short = markdown.summary(result)
    assert "**INCOMPLETE:** Kubernetes pods: forbidden &lt;b&gt;x&lt;/b&gt;" in short
    assert f"{n} findings waived" in short


def test_owners_are_named_escaped_and_unknown_shown_as_such() -> None:
    evil = "<script>x</script> *b* | [l](http://e)"
    out = markdown.render(with_owners(Owner(evil, "label owner of Pod x", "a@b.example"), None))
    rows = [t for t in _tables(out) if t[0][:5] == ["#", "Severity", "Code", "Resource", "Owner"]]
    cells = [r[4] for t in rows for r in t[1:]]
    assert cells[:2] == [f"{evil} (a@b.example)", "unknown"]  # read back as text
    rendered = MarkdownIt("commonmark").enable("table").render(out)
    assert "<script" not in rendered and "<em>b</em>" not in rendered and "<a " not in rendered
    assert f"<td>{html.escape(evil)} (a@b.example)</td>" in rendered


def test_skipped_checks_listed() -> None:
    result = dataclasses.replace(demo_result(), skipped=(Skipped("GPU020", "no FB_USED series"),))
    out = markdown.render(result)
    assert "## Skipped checks" in out
    assert "- `GPU020`: no FB\\_USED series" in out


def test_summary_is_short_and_names_top_findings(
    previous_file: Path, demo_json: dict[str, Any]
) -> None:
    result = demo_result(previous=("last-week.json", load_report(previous_file)))
    text = markdown.summary(result)
    assert len(text) <= markdown.SUMMARY_LIMIT
    assert text.startswith("**GPU audit: scenario-1** (168 h, 2026-11-16 00:00 to ")
    assert f"wasted **{demo_json['summary']['wasted_cost']:,.0f} USD**" in text
    risks = [f for f in demo_json["findings"] if f["category"] == "risk"]
    waste = [f for f in demo_json["findings"] if f["category"] == "waste"]
    assert f"Risks, most urgent first (3 of {len(risks)} findings):" in text
    assert f"Waste, ranked by wasted GPU-hours. Top 5 of {len(waste)} findings:" in text
    assert text.index("Risks, most urgent") < text.index("Waste, ranked")
    for f in (risks[0], waste[0]):
        ref = f"{f['resource']['namespace']}/{f['resource']['name']}".lstrip("/")
        assert f"1. {f['severity']} {f['code']} {ref}: " in text
    assert "(new)" in text and "6. " not in text and "4. " in text
    assert "1 new, 1 worse, 1 improved, 1 resolved; wasted cost -1,000 USD" in text


def test_hostile_names_are_literal_text(tmp_path: Path) -> None:
    snap = write_hostile_snapshot(tmp_path)
    out = _scan("--snapshot", str(snap), "--format", "markdown", "--group-by-label", "team")
    assert "\x1b" not in out and "\r" not in out and "x" * 401 not in out
    rendered = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(out)
    for tag in ("<script", "<img", "<a ", "<em>", "<s>", "<b>", "<i>"):
        assert tag not in rendered
    # The only code spans are ours: check codes, and the `gpuaudit explain CODE` hint.
    assert rendered.count("<code>") == len(re.findall(r"`GPU\d{3}`", out)) + 1
    tables = _tables(out)
    assert all(len(row) == len(t[0]) for t in tables for row in t)  # no cell broke out
    findings = next(t for t in tables if t[0][:2] == ["#", "Severity"])
    shown = {row[3] for row in findings[1:]}
    for key, name in HOSTILE.items():
        ns = f"ns-{key}" if key != "html" else "<script>ns</script>"
        assert terminal(f"{ns}/{name}", 120) in shown
    team = next(t for t in tables if t[0][0] == "team")
    assert {row[0] for row in team[1:]} == {terminal(n, 80) for n in HOSTILE.values()}
    title = "".join(c.content for c in _parse(out)[1].children or [])
    assert title == f"GPU audit: {terminal(HOSTILE_CLUSTER, 120)}"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("[x](http://e)", "[x](http://e)"),
        ("<http://e>", "<http://e>"),
        ("a|b", "a|b"),
        ("\\*lit\\*", "\\*lit\\*"),
        ("&lt;", "&lt;"),
        ("www.example.com", "www.example.com"),
        ("@channel", "@channel"),
    ],
)
def test_md_escapes_round_trip(raw: str, shown: str) -> None:
    rendered = (
        MarkdownIt("commonmark").enable("table").render(f"| h |\n|---|\n| {markdown.md(raw)} |\n")
    )
    cell = rendered.split("<td>")[1].split("</td>")[0]
    assert html.unescape(cell) == shown
    assert "<a" not in cell
