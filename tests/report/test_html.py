"""The HTML report through the CLI: self-contained, complete, deterministic charts, names
from the cluster shown as text, never markup, and templates that ship with the package."""

from __future__ import annotations

import dataclasses
import fnmatch
import html
import json
import re
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import pytest
from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.audit.waivers import Waiver
from gpuaudit.cli import app
from gpuaudit.inventory.ownership import Owner
from gpuaudit.report import charts
from gpuaudit.report import html as html_report
from gpuaudit.report.fold import fold
from gpuaudit.report.text import terminal
from tests.support.factories import Series, gpu_labels
from tests.support.factories import snapshot as make_snapshot
from tests.support.paths import ROOT
from tests.support.reports import (
    HOSTILE,
    HOSTILE_CLUSTER,
    RESOLVED_NAME,
    Page,
    demo_result,
    previous_report,
    with_owners,
    write_hostile_snapshot,
)

runner = CliRunner()
# Elements that load or run something; none may appear.
ACTIVE = {"script", "iframe", "frame", "object", "embed", "link", "img", "video", "audio", "form"}
URL_ATTRS = {"src", "href", "xlink:href", "srcset", "action", "poster", "data", "background"}


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
def full_html(tmp_path_factory: pytest.TempPathFactory, demo_json: dict[str, Any]) -> str:
    """The demo with a trend and a label table, written with --output like the CronJob does."""
    d = tmp_path_factory.mktemp("html")
    prev = d / "last-week.json"
    prev.write_text(json.dumps(previous_report(demo_json)), encoding="utf-8")
    out = d / "report.html"
    args = ["--demo", "--format", "html", "--output", str(out), "--group-by-label", "app"]
    assert _scan(*args, "--previous", str(prev)) == ""
    return out.read_text(encoding="utf-8")


def assert_self_contained(text: str) -> None:
    """Nothing in the page reaches the network: no active elements, no event handlers, every
    URL-bearing attribute is a fragment or an inline PNG, no other attribute holds a URL, and
    no stylesheet imports, loads fonts or points `url()` anywhere but inside the page."""
    page = Page(text)
    assert not page.tags() & ACTIVE
    for _, attrs in page.elements:
        for name, value in attrs.items():
            assert not name.startswith("on"), name
            if name in URL_ATTRS:
                assert value.startswith(("#", "data:image/png;base64,")), (name, value[:80])
            elif not name.startswith("xmlns"):  # xmlns names SVG's namespaces; never fetched
                assert "://" not in value, (name, value[:80])
    css = "\n".join(page.styles)
    assert "://" not in css and "@import" not in css and "@font-face" not in css
    assert not re.search(r"url\((?!#)", css)
    assert not re.search(r"url\((?!#)", " ".join(a.get("style", "") for _, a in page.elements))


def test_demo_html_is_one_self_contained_page(full_html: str, demo_json: dict[str, Any]) -> None:
    assert full_html.startswith("<!DOCTYPE html>\n")
    assert_self_contained(full_html)
    # Not even as text: the only URLs in the demo's page are SVG's namespace names.
    assert "://" not in re.sub(r'\sxmlns(:\w+)?="[^"]*"', "", full_html)
    page = Page(full_html)
    # the week, the heatmap, capacity, the held GPU-hours by cause
    assert [t for t, _ in page.elements].count("svg") == 4
    ids = {a.get("id") for _, a in page.elements if a.get("id")}
    assert {"week", "trend", "findings", "risks", "waste", "by-namespace", "by-label"} <= ids
    assert "causes" in ids
    assert len(ids) == sum(1 for _, a in page.elements if a.get("id"))  # ids are unique
    assert "<title>GPU audit: scenario-1</title>" in full_html
    text = " ".join(page.text.split())
    s = demo_json["summary"]
    assert f"GPUs {s['gpus_total']:,} physical GPUs in the fleet" in text
    assert f"Wasted {s['wasted_cost']:,.0f} USD" in text
    n = len(demo_json["findings"])
    assert f"Findings ({n}, ranked by wasted GPU-hours; risks listed apart)" in text
    assert "Waste by label app" in text
    # A short explanation goes with each chart.
    assert "The blue area is the number of GPUs held by pods in each hour" in text
    assert "red is idle, green is busy, grey means it held no GPU" in text


def test_findings_keep_the_ranked_order_with_severity_and_numbers(
    full_html: str, demo_json: dict[str, Any]
) -> None:
    section = full_html[full_html.index('id="findings"') : full_html.index('id="capacity"')]
    assert section.index('id="risks"') < section.index('id="waste"')
    refs = [html.unescape(r) for r in re.findall(r'<td class="res">(.*?)<span', section)]
    ranks = [int(r) for r in re.findall(r'<tr><td class="num">(\d+)</td>', section)]
    rows = [f for f in demo_json["findings"] if f["primary"]]
    # Alike findings fold into one row, at the rank of its first: the rows keep the order.
    assert len(ranks) == len(refs) < len(rows) and ranks == sorted(ranks) and ranks[0] == 1
    firsts = [rows[r - 1] for r in ranks]
    for ref, f in zip(refs, firsts, strict=True):
        name = f"{f['resource']['namespace']}/{f['resource']['name']}".lstrip("/")
        assert ref == name or (ref.endswith("*") and name.startswith(ref[:-1])), (ref, name)
    badges = re.findall(r'class="badge sev-(\w+)"', section)
    assert badges == [f["severity"] for f in firsts]
    # The risks first, then the waste, the most wasted GPU-hours first.
    kinds = [f["category"] for f in firsts]
    assert kinds == sorted(kinds, key=lambda k: k != "risk")
    waste = [f["impact"]["gpu_hours"] for f in firsts if f["category"] == "waste"]
    assert waste == sorted(waste, reverse=True)
    # A resource with several findings is one row: the others' codes and text go with it.
    nb = next(f for f in rows if f["resource"]["name"] == "nb-idle-0-0")
    assert nb["code"] == "GPU001" and nb["related"] == ["GPU021"]
    row = next(r for r in section.split("<tr>") if 'class="res">notebooks/nb-idle-0-0<' in r)
    assert '<span class="related">+ <code>GPU021</code></span>' in row
    assert '<div class="also"><code>GPU021</code> Pod notebooks/nb-idle-0-0 held a whole' in row
    first = demo_json["findings"][0]["impact"]
    gh, cost = f"{first['gpu_hours']:,.1f}", f"{first['cost']:,.0f}"
    assert f'<td class="num">{gh}</td><td class="num">{cost}</td>' in section
    statuses = re.findall(r'class="badge st-(\w+)"', section)
    assert [s for s in statuses if s != "unchanged"] == ["new", "improved", "worse"]
    # Each row names its finding's owner (JSON `findings[].owner`), with the contact if any.
    owners = re.findall(r'<td class="owner">(.*?)</td>', section)
    assert len(owners) == len(ranks)
    for ref, shown, f in zip(refs, owners, firsts, strict=True):
        o = f["owner"]
        contact = f'<span class="contact">{html.escape(o["contact"])}</span>'
        want = html.escape(o["name"] or "unknown") + (contact if o["contact"] else "")
        assert shown == want or (ref.endswith("*") and shown == "several owners"), (ref, shown)


def test_alike_findings_fold_into_one_row_as_in_the_terminal(full_html: str) -> None:
    section = full_html[full_html.index('id="findings"') : full_html.index('id="capacity"')]
    row = next(r for r in section.split("<tr>") if 'class="res">batch/*<' in r)
    text = " ".join(Page(row).text.split())
    # The terminal's fold: the batch namespace's part-time reservations whose fix runs at
    # 01:00 (two more, llm-plain and llm-queue, run at 13:00: rows of their own).
    (batch,) = [
        r.findings for r in fold(demo_result().findings) if r.first.code == "GPU003" and r.folded
    ]
    assert {f.resource.namespace for f in batch} == {"batch"}
    assert all("`0 1 * * *`" in f.recommendation for f in batch)
    hours = sum(f.impact.gpu_hours for f in batch)
    assert len(batch) == 13 and "batch/* 13 Pods" in text and f"{hours:,.1f}" in text
    assert "The same for 12 more like it, each with its own names and figures" in text
    # The others' names fold away (a <details>, closed: not printed), the JSON names each.
    assert '<details class="folded"><summary>' in row and "batch/report-batch-" in row
    assert "Alike findings (the same check, fix and namespace) are folded into one row" in section


def test_a_table_of_contents_links_every_section_in_page_order(full_html: str) -> None:
    page = Page(full_html)
    order = [a["id"] for _, a in page.elements if a.get("id")]
    links = [a["href"] for t, a in page.elements if t == "a"]
    assert links and all(h.startswith("#") for h in links)
    targets = [h[1:] for h in links]
    assert set(targets) <= set(order)
    # The contents list the sections as the page has them; every section is listed.
    assert targets == [i for i in order if i in targets]
    sections = [a["id"] for t, a in page.elements if t == "section"]
    assert set(sections) <= set(targets)
    # The breakdowns by namespace and label come before the findings, the risks first.
    for before, after in (("by-namespace", "findings"), ("by-label", "findings")):
        assert order.index(before) < order.index(after)
    assert order.index("risks") < order.index("waste") < order.index("capacity")
    toc = full_html[full_html.index('<nav class="toc"') : full_html.index("</nav>")]
    assert '<a href="#risks">Risks (' in toc and '<a href="#waste">Waste (' in toc


def test_trend_section(full_html: str, demo_json: dict[str, Any]) -> None:
    section = full_html[full_html.index('id="trend"') : full_html.index('id="by-namespace"')]
    text = " ".join(Page(section).text.split())
    assert "Trend since last-week.json, generated 2026-11-16T06:00:00Z" in text
    unchanged = len(demo_json["findings"]) - 3
    for count in ("1 new", "1 worse", "1 improved", "1 resolved", f"{unchanged} unchanged"):
        assert count in text
    assert '<span class="delta good">-1,000 USD</span>' in section
    assert f"old/{RESOLVED_NAME}" in text  # shown literally
    assert "<i>" not in section


def test_plain_demo_has_no_trend_or_label_table() -> None:
    out = _scan("--demo", "--format", "html")
    assert_self_contained(out)
    assert 'id="trend"' not in out and 'id="by-label"' not in out
    assert "since the previous report" not in out


def test_charts_are_deterministic_inline_svg() -> None:
    result = demo_result()
    assert result.breakdown is not None
    c = result.breakdown.charts
    first = charts.fleet_chart(c, result.summary.gpus_total)
    assert first == charts.fleet_chart(c, result.summary.gpus_total)
    heat = charts.heatmap_chart(c)
    assert heat == charts.heatmap_chart(c)
    assert result.capacity is not None
    cap = charts.capacity_chart(result.capacity)
    assert cap == charts.capacity_chart(result.capacity)
    for svg, prefix in ((first, "fleet"), (heat, "heat"), (cap, "capacity")):
        assert svg.startswith('<svg class="chart" role="img" aria-label=')
        assert svg.endswith("</svg>")
        assert "<metadata" not in svg and "dc:date" not in svg and "<?xml" not in svg
        assert not re.search(r"<svg\b[^>]*\s(width|height)=", svg)  # scales with the page
        assert "viewBox=" in svg
        assert all(i.startswith(f"{prefix}-") for i in re.findall(r'\bid="([^"]+)"', svg))
        assert "font-family" in svg and ".ttf" not in svg and "@font-face" not in svg
    assert "Mon 16 Nov" in first and "ml-train" in heat


def test_matplotlib_is_imported_only_to_draw() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from gpuaudit.cli import app\n"
        "import gpuaudit.report.html, gpuaudit.report.markdown, gpuaudit.report.charts\n"
        "assert CliRunner().invoke(app, ['--help']).exit_code == 0\n"
        "print('matplotlib' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_hostile_names_are_text_not_markup(tmp_path: Path) -> None:
    snap = write_hostile_snapshot(tmp_path)
    out = _scan("--snapshot", str(snap), "--format", "html", "--group-by-label", "team")
    assert_self_contained(out)
    assert "\x1b" not in out and "\r" not in out and "x" * 501 not in out
    page = Page(out)
    assert not page.tags() & {"b", "i", "script", "img"}
    # The only links are the table of contents', to sections of the page.
    assert all(a["href"].startswith("#") for t, a in page.elements if t == "a")
    text = page.text
    for key, name in HOSTILE.items():
        ns = f"ns-{key}" if key != "html" else "<script>ns</script>"
        assert terminal(f"{ns}/{name}", 160) in text
        assert terminal(name, 80) in text  # the team label table
    assert f"GPU audit: {terminal(HOSTILE_CLUSTER, 80)}" in text  # the <title>
    assert "<script>alert(1)</script><img src=x onerror=alert(2)>" in text
    assert "evil-\\x1b[31mred\\x1b[0m" in text
    # Namespace names reach the heatmap's tick labels as escaped SVG text.
    assert "&lt;script&gt;ns&lt;/script&gt;" in out[out.index('aria-label="Engine activity') :]


def test_a_week_without_allocations_says_so(tmp_path: Path) -> None:
    snap = make_snapshot([Series(gpu_labels(uuid="GPU-0"), act=[0.5] * 4)], hours=4)
    path = tmp_path / "idle.json"
    snapshot.write(snap, path)
    out = _scan("--snapshot", str(path), "--format", "html")
    assert "No GPU was held by a pod in this window: nothing to chart." in out
    assert "<svg" not in out


def test_incomplete_banner_waivers_skipped_and_warnings() -> None:
    waiver = Waiver("GPU003", "nightly <batch> accepted", date(2099, 1, 1), namespace="batch")
    result = dataclasses.replace(
        demo_result(waivers=(waiver,)),
        complete=False,
        incomplete_reasons=("Kubernetes pods: forbidden <b>x</b>",),
        warnings=("a <warning>",),
    )
    out = html_report.render(result)
    assert_self_contained(out)
    assert '<div class="banner" role="alert"><strong>INCOMPLETE.</strong>' in out
    assert "<li>Kubernetes pods: forbidden &lt;b&gt;x&lt;/b&gt;</li>" in out
    assert f"Waived findings ({len(result.suppressed)})" in out
    assert "<td>nightly &lt;batch&gt; accepted</td><td>2099-01-01</td>" in out
    assert '<section id="warnings">' in out and "<li>a &lt;warning&gt;</li>" in out


NASTY = "<script>alert('x')</script> \"q\" & \x1b[31mred"
# Autoescaped, with the escape sequence shown as text first.
ESCAPED = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &quot;q&quot; &amp; \\x1b[31mred"


def test_a_hostile_name_reaches_the_page_escaped() -> None:
    result = demo_result()
    first = result.primaries[0]
    evil = dataclasses.replace(first, resource=dataclasses.replace(first.resource, name=NASTY))
    result = dataclasses.replace(
        result,
        cluster=NASTY,
        findings=tuple(evil if f is first else f for f in result.findings),
        warnings=(NASTY,),
    )
    out = html_report.render(result)
    assert f"<title>GPU audit: {ESCAPED}</title>" in out
    assert f'<h1>GPU audit <span class="cluster">{ESCAPED}</span></h1>' in out
    ref = f"{first.resource.namespace}/{ESCAPED}" if first.resource.namespace else ESCAPED
    assert f'<td class="res">{ref}<span class="kind">' in out
    assert f"<li>{ESCAPED}</li>" in out  # the warnings
    assert "<script>" not in out and "\x1b" not in out
    assert "script" not in Page(out).tags()
    assert NASTY.replace("\x1b", "\\x1b") in Page(out).text  # shown, as text


def test_owners_are_named_escaped_and_unknown_shown_as_such() -> None:
    out = html_report.render(with_owners(Owner(NASTY, "label owner of Pod x", "#ml-<b>"), None))
    owners = re.findall(r'<td class="owner">(.*?)</td>', out)
    assert owners[:2] == [f'{ESCAPED}<span class="contact">#ml-&lt;b&gt;</span>', "unknown"]
    assert "<script>" not in out and "script" not in Page(out).tags()
    assert NASTY.replace("\x1b", "\\x1b") in Page(out).text


def test_the_templates_layout_does_not_reach_the_page() -> None:
    """Line breaks and indentation in the section templates are for their reader: the body
    is one line, but for the charts' own SVG."""
    out = html_report.render(demo_result())
    body = out[out.index("<main>\n") + len("<main>\n") : out.index("\n</main>")]
    assert "\n" not in re.sub(r"<svg\b.*?</svg>", "", body, flags=re.S)
    assert body.startswith("<header><h1>") and body.endswith("</footer>")


def test_every_template_is_package_data() -> None:
    """A wheel carries the templates and the stylesheet: each file under `templates/` matches
    a package-data pattern of its folder, and setuptools lists that folder as a package."""
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    setup = setup["setuptools"]
    folder = Path(html_report.__file__).parent / "templates"
    files = [p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert any(p.name == "report.css" for p in files)
    for path in files:
        package = ".".join(path.parent.relative_to(ROOT).parts)
        assert package in setup["packages"], package
        patterns = setup["package-data"].get(package, [])
        assert any(fnmatch.fnmatch(path.name, g) for g in patterns), path
