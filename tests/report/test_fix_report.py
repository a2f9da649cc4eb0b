"""Every report says what `gpuaudit fix` writes: `findings[].fix` in the JSON, a mark on the
table's rows, a short section of the changes in Markdown and HTML."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.report.text import FIX_COMMAND

runner = CliRunner()


def _scan(*args: str) -> str:
    res = runner.invoke(app, ["scan", "--demo", "-q", *args])
    assert res.exit_code == 0, res.output
    return res.stdout


def test_json_findings_of_fixable_checks_say_what_fix_writes_or_why_not() -> None:
    doc = json.loads(_scan("-f", "json"))
    fixes = {f["code"]: f["fix"] for f in doc["findings"] if "fix" in f}
    assert {"GPU001", "GPU070", "GPU090"} <= set(fixes)
    assert all("fix" not in f for f in doc["findings"] if f["code"] in ("GPU010", "GPU040"))
    for f in doc["findings"]:
        fix = f.get("fix")
        if fix is None:
            continue
        assert set(fix) == {"kind", "file", "target", "reason"}
        if fix["kind"] is None:
            assert fix["file"] == "" and fix["reason"]
        else:
            assert fix["file"] and fix["target"]["kind"]


def test_the_table_marks_fixable_rows_and_says_what_the_mark_means() -> None:
    text = _scan("--all")
    assert "+ marks a row gpuaudit fix writes a change for" in " ".join(text.split())
    assert any(line.split()[2:3] == ["GPU070+"] for line in text.splitlines() if line.strip())


def test_markdown_and_html_list_the_changes() -> None:
    md = _scan("-f", "markdown")
    assert "\n## Changes (" in md and FIX_COMMAND in md
    assert "| Change | File | Findings | Saves per week |" in md
    html = _scan("-f", "html")
    assert '<section id="fixes"><h2>Changes (' in html and '<a href="#fixes">' in html
