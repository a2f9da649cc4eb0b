"""`--per-owner DIR`: one Markdown and one HTML page per owner and an index, with safe file
names, created exclusively; each owner's figures and ranks (`gpuaudit.audit.owner_rollup`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaudit.app import config, owner_files, pipeline
from gpuaudit.audit.breakdown import Group
from gpuaudit.audit.owner_rollup import Rank, _ranks
from gpuaudit.cli import app
from gpuaudit.report.markdown import md
from gpuaudit.report.owner_pages import Page, file_stem, html, markdown

runner = CliRunner()


def test_file_names_are_safe_stable_and_apart() -> None:
    assert file_stem(None) == "owner-unknown"
    assert file_stem("ML Platform") == file_stem("ML Platform")
    assert file_stem("ML Platform").startswith("owner-ml-platform-")
    # Names that slug alike keep apart by the hash of the whole name.
    assert file_stem("ml platform") != file_stem("ML Platform")
    for hostile in ("../../etc/passwd", "/abs", "a/b\\c", "..", "x\x00y", "<script>", "é" * 300):
        stem = file_stem(hostile)
        assert "/" not in stem and "\\" not in stem and ".." not in stem
        assert all(c.isascii() and (c.isalnum() or c in ".-") for c in stem)
        assert len(stem) <= 6 + 60 + 1 + 8


def _group(key: str, idle: float, act: float | None) -> Group:
    return Group(key, 100.0, idle, idle * 2, act)


def test_ranks_share_places_on_ties_in_name_order() -> None:
    groups = [_group("b", 10, 0.5), _group("a", 10, 0.2), _group("c", 30, 0.9), _group("d", 0, 0.2)]
    idle = _ranks(groups, lambda g: -g.idle_gpu_hours)
    assert idle == {"c": Rank(1, 4), "a": Rank(2, 4), "b": Rank(2, 4), "d": Rank(4, 4)}
    eff = _ranks(groups, lambda g: g.mean_activity or 0.0)
    assert eff == {"a": Rank(1, 4), "d": Rank(1, 4), "b": Rank(3, 4), "c": Rank(4, 4)}


def test_the_demo_per_owner_pages_match_the_breakdown_by_team(tmp_path: Path) -> None:
    folder = tmp_path / "owners"
    cfg = config.for_scan(
        {"demo": True, "per_owner": folder, "group_by_label": "team", "output": tmp_path / "r"}
    )
    outcome = pipeline.run(cfg)
    assert outcome.failures == ()
    result = outcome.result
    by_team = {g.key: g for g in result.breakdown.by_group if g.key != "(no label)"}
    sections = {s.name: s for s in result.by_owner}
    # The demo's pods name their team by the `team` label and nothing else names an owner:
    # each owner's GPU-hours are the breakdown's for the team.
    assert set(sections) == {*by_team, None}
    for team, g in by_team.items():
        u = sections[team].usage
        assert u is not None
        assert u.allocated_gpu_hours == pytest.approx(g.allocated_gpu_hours)
        assert u.idle_gpu_hours == pytest.approx(g.idle_gpu_hours)
        assert u.mean_activity == pytest.approx(g.mean_activity)
    # Ranks by hand from those figures: most idle first, least efficient first.
    teams = sorted(by_team)
    by_idle = sorted(teams, key=lambda t: (-round(by_team[t].idle_gpu_hours, 9), t))
    by_eff = sorted(teams, key=lambda t: (round(by_team[t].mean_activity or 0, 9), t))
    for i, t in enumerate(by_idle, 1):
        assert sections[t].idle_rank == Rank(i, len(teams))
    for i, t in enumerate(by_eff, 1):
        assert sections[t].efficiency_rank == Rank(i, len(teams))
    # Every finding is someone's, the unknown group's included, none twice.
    assert sum(len(s.findings) for s in result.by_owner) == len(result.findings)
    unknown = sections[None]
    assert unknown.idle_rank is None and unknown.findings
    assert all(f.owner is not None and f.owner.name is None for f in unknown.findings)
    # A change is listed for the owners of the findings it answers.
    for s in result.by_owner:
        prints = {f.fingerprint() for f in s.findings}
        for c in result.fixes.changes:
            assert (c in s.changes) == any(f.fingerprint() in prints for f in c.findings)
    names = sorted(os.listdir(folder))
    stems = [file_stem(s.name) for s in result.by_owner]
    assert names == sorted(["index.md", *(f"{x}.md" for x in stems), *(f"{x}.html" for x in stems)])
    top = by_idle[0]
    page = (folder / f"{file_stem(top)}.md").read_text()
    assert page.startswith(f"# GPU audit for {top}: ")
    assert f"Among owners: 1 of {len(teams)} by idle GPU-hours (1 is the most idle)" in page
    assert f"({len(sections[top].findings)} findings" in page
    html = (folder / f"{file_stem(top)}.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and f"GPU audit for {top}" in html
    index = (folder / "index.md").read_text()
    assert "| unknown owner |" in index and f"[md]({file_stem(top)}.md)" in index


def test_files_are_created_exclusively_and_the_cli_says_why(tmp_path: Path) -> None:
    folder = tmp_path / "owners"
    folder.mkdir()
    (folder / "index.md").write_text("mine")
    res = runner.invoke(
        app, ["scan", "--demo", "-q", "-o", str(tmp_path / "r"), "--per-owner", str(folder)]
    )
    assert res.exit_code == 2
    assert "it exists already" in res.output
    assert (folder / "index.md").read_text() == "mine"
    # A link planted where a page goes is not followed.
    other = tmp_path / "owners2"
    other.mkdir()
    target = tmp_path / "victim"
    target.write_text("keep")
    (other / "owner-unknown.md").symlink_to(target)
    cfg = config.for_scan({"demo": True, "per_owner": other, "output": tmp_path / "r2"})
    outcome = pipeline.run(cfg)
    assert target.read_text() == "keep"
    assert [f for f in outcome.failures if "owner-unknown.md" in f]
    # Writing again into a folder that holds the pages refuses each page, replaces none.
    again = owner_files.write(outcome.result, other)
    assert len(again) == 2 * len(outcome.result.by_owner) + 1


def test_hostile_owner_names_reach_the_pages_escaped() -> None:
    p = Page(
        owner="<script>alert(1)</script>",
        cluster="c",
        window="w",
        generated="g",
        contact="a@b.com",
        sources=("label team of Pod x/[y](javascript:1)",),
        usage="u",
        ranks="r",
        waste="w",
        since="",
        currency="USD",
        rows=(),
        more=0,
        waived=(),
        changes=(),
    )
    assert "<script>" not in html(p) and "&lt;script&gt;" in html(p)
    assert "<script>" not in markdown(p)
    assert "\\[y\\]" in markdown(p)


def test_new_and_still_open_against_the_previous_report(tmp_path: Path) -> None:
    last = tmp_path / "last.json"
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json", "-o", str(last)])
    assert res.exit_code == 0
    doc = json.loads(last.read_text())
    # Last week lacked one finding of the owner with the most: it is new, the rest still open.
    dropped = next(f for f in doc["findings"] if f["owner"]["name"] == "data")
    doc["findings"] = [f for f in doc["findings"] if f["fingerprint"] != dropped["fingerprint"]]
    last.write_text(json.dumps(doc))
    cfg = config.for_scan(
        {"demo": True, "previous": last, "per_owner": tmp_path / "o", "output": tmp_path / "r"}
    )
    outcome = pipeline.run(cfg)
    assert outcome.failures == ()
    for s in outcome.result.by_owner:
        prints = sorted({f.fingerprint() for f in s.findings})
        if s.name == "data":
            assert s.new == (dropped["fingerprint"],)
            assert s.still_open == tuple(p for p in prints if p != dropped["fingerprint"])
        else:
            assert s.new == () and s.still_open == tuple(prints)
    page = (tmp_path / "o" / f"{file_stem('data')}.md").read_text()
    assert "Since the earlier report: 1 new, " in page
    assert "| new |" in page and "| still open |" in page
    assert f"Fingerprint (for gpuaudit ack): {md(dropped['fingerprint'], 400)}" in page
