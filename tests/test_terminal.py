"""The terminal report as people see it: `gpuaudit scan --demo` run in a real terminal (tmux)
at 80, 120 and 200 columns and captured from the screen, compared with reviewed golden files
(`pytest --update-goldens` rewrites them; review the diff like code). The README shows the
80-column capture.

Also: a finding takes one to three lines at 80 columns, no line is wider than the terminal or
ends in a space, UUIDs are short in the table and whole in JSON, alike findings fold (and
`--all` unfolds them), and the header says what is waived, skipped or incomplete.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from gpuaudit.audit.assemble import AuditResult
from gpuaudit.audit.waivers import parse as parse_waivers
from gpuaudit.checks.findings import Skipped
from gpuaudit.cli import app
from gpuaudit.report import print_table, table_text
from gpuaudit.report.fold import fold
from tests.support.paths import ROOT
from tests.support.reports import demo_result

GOLDENS = Path(__file__).parent / "goldens" / "terminal"
WIDTHS = (80, 120, 200)
# A row's first line: its rank, severity and code (`+` after it: `gpuaudit fix` writes a change).
ROW = re.compile(r"^ *\d+  (critical|high|medium|low|info) +GPU\d{3}\+? +\S")

runner = CliRunner()


def tmux_capture(args: list[str], width: int, folder: Path, height: int = 50) -> str:
    """What a terminal `width` columns wide shows after `gpuaudit ARGS` ran in it, history
    included: lines wrapped by the terminal are joined (so a line wider than the terminal
    shows as one long line), trailing spaces kept (so they show)."""
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.fail("tmux is missing: scripts/test.sh installs it (apt-get install tmux)")
    sock = f"gpuaudit-test-{os.getpid()}-{width}"
    conf = folder / "tmux.conf"
    conf.write_text("set -g history-limit 50000\nset -g status off\n")
    done = f"done-{sock}"
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "gpuaudit", *args])
    script = (
        f"cd {shlex.quote(str(ROOT))} && env -u COLUMNS -u LINES {command}; "
        f"{tmux} -L {sock} wait-for -S {done}; sleep 600"
    )
    base = [tmux, "-L", sock, "-f", str(conf)]
    try:
        subprocess.run(
            [*base, "new-session", "-d", "-x", str(width), "-y", str(height), "sh", "-c", script],
            check=True,
            env={**os.environ, "TERM": "xterm-256color"},
        )
        subprocess.run([*base, "wait-for", done], check=True, timeout=300)
        shown = subprocess.run(
            [*base, "capture-pane", "-p", "-J", "-S", "-", "-E", "-"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    finally:
        subprocess.run([*base, "kill-server"], capture_output=True)
    return "\n".join(shown.rstrip("\n").splitlines()).rstrip("\n") + "\n"


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[int, str]:
    folder = tmp_path_factory.mktemp("tmux")
    return {w: tmux_capture(["scan", "--demo"], w, folder) for w in WIDTHS}


@pytest.mark.parametrize("width", WIDTHS)
def test_capture_matches_the_reviewed_golden(
    captures: dict[int, str], width: int, update_goldens: bool
) -> None:
    golden = GOLDENS / f"scan-demo-{width}.txt"
    shown = captures[width]
    if update_goldens:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(shown, encoding="utf-8")
    assert shown == golden.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def demo() -> AuditResult:
    return demo_result()


@pytest.mark.parametrize("width", WIDTHS)
def test_every_line_fits_and_none_ends_in_a_space(
    captures: dict[int, str], width: int, demo: AuditResult
) -> None:
    lines = captures[width].splitlines()
    assert max(len(line) for line in lines) <= width
    assert [line for line in lines if line != line.rstrip()] == []
    # The stderr summary comes last, wrapped at the terminal's width.
    found = f"gpuaudit: {len(demo.findings)} findings"
    summary = next(i for i, line in enumerate(lines) if line.startswith(found))
    idle = f"{demo.summary.idle_gpu_hours:,.0f} idle GPU-hours"
    assert lines[summary].startswith(f"{found}, {idle}")
    assert " ".join(lines[summary:]).endswith(f"{len(demo.checks_run)} checks ran, 0 skipped")


def _table_rows(text: str) -> list[list[str]]:
    """The rows of the tables (the risks', then the waste's), each the lines it takes."""
    rows: list[list[str]] = []
    inside = False
    indent = 0
    for line in text.splitlines():
        if line.startswith(" #  Severity  Code"):
            # A row's further lines continue its Resource column (or a later one).
            indent = line.index("Resource")
        elif line.startswith("─"):
            inside = True
        elif not line.strip():
            inside = False
        elif inside and ROW.match(line):
            rows.append([line])
        elif inside:
            assert indent and line.startswith(" " * indent), line
            rows[-1].append(line)
    return rows


def test_at_80_columns_a_finding_takes_one_to_three_lines(
    captures: dict[int, str], demo: AuditResult
) -> None:
    # One row per resource (a finding on a resource another one names is under it), alike
    # ones folded.
    folds = fold(demo.primaries)
    rows = _table_rows(captures[80])
    assert len(rows) == len(folds) == 70
    assert all(1 <= len(r) <= 3 for r in rows)
    assert sum(len(r) == 1 for r in rows) >= 10
    # With the ledger, the capacity plan and its assumptions, two tables (risks, waste) and
    # the first 3 risks and the top 5 waste in full: not every finding.
    lines = captures[80].splitlines()
    assert len(lines) < 400
    assert len([line for line in lines if re.match(r"#\d+ ", line)]) == 3 + 5
    wide = _table_rows(captures[200])
    # Only the folds take two lines (their count below the pattern).
    assert len(wide) == len(folds)
    assert sum(len(r) for r in wide) == len(folds) + sum(r.folded for r in folds)


def test_uuids_are_short_in_the_table_and_whole_in_json(captures: dict[int, str]) -> None:
    rows = _table_rows(captures[120])
    assert rows[0][0].split()[3] == "GPU-e2c51412…"
    table = "\n".join(line for r in rows for line in r)
    assert "GPU-e2c51412-c218" not in table
    # The message written out below the table keeps the UUID whole.
    assert "GPU-e2c51412-c218-a8fe-26a3-a48cad1d7df1) on node gb200-node-002" in captures[120]
    doc = json.loads(runner.invoke(app, ["scan", "--demo", "-f", "json", "-q"]).stdout)
    assert doc["findings"][0]["resource"]["name"] == "GPU-e2c51412-c218-a8fe-26a3-a48cad1d7df1"


def test_alike_findings_fold_into_one_row_with_count_and_sum(demo: AuditResult) -> None:
    rows = fold(demo.findings)
    folded = [r for r in rows if r.folded]
    assert [r.first.code for r in folded] == [
        "GPU080",
        "GPU080",
        "GPU050",
        "GPU060",
        "GPU001",
        "GPU003",
        "GPU071",
        "GPU001",
    ]
    batch, pools = folded[5], folded[2]
    assert batch.first.code == "GPU003" and len(batch.findings) == 13
    assert pools.first.code == "GPU050" and pools.pattern() == "NVIDIA-*"
    assert {f.resource.namespace for f in batch.findings} == {"batch"}
    assert batch.gpu_hours == pytest.approx(sum(f.impact.gpu_hours for f in batch.findings))
    text = table_text(demo, width=120)
    row = next(line for line in text.splitlines() if re.search(r" GPU003\+? +batch/\*", line))
    assert f"{batch.gpu_hours:,.1f}" in row and "Part-time reservation" in row
    assert "13 Pods" in text
    flat = " ".join(text.split())
    assert f"{len(demo.findings)} findings in 70 rows" in text
    assert "alike ones folded into one row (--all" in flat
    # The fold's other members are named below the table.
    alone = " ".join(table_text(dataclasses.replace(demo, findings=batch.findings)).split())
    assert (
        "The same for 12 more like it, each with its own names and figures: "
        "batch/report-batch-002-0"
    ) in alone


def test_all_lists_every_finding_in_full(demo: AuditResult) -> None:
    text = table_text(demo, width=120, every=True)
    # One row per resource: the 8 findings on a resource another one names are under it.
    assert len(_table_rows(text)) == len(demo.primaries) == len(demo.findings) - 8
    assert "Every finding in full" in text
    assert text.count("\n#") == len(demo.primaries)
    res = runner.invoke(app, ["scan", "--demo", "--all"], env={"COLUMNS": "120"})
    assert res.exit_code == 0 and len(_table_rows(res.stdout)) == len(demo.primaries)


def test_folding_keeps_the_order_and_critical_findings_apart(demo: AuditResult) -> None:
    rows = fold(demo.findings)
    assert [r.rank for r in rows] == sorted(r.rank for r in rows)
    assert sum(len(r.findings) for r in rows) == len(demo.findings)
    assert all(not r.folded for r in rows if r.first.severity.value == "critical")
    assert all(len(r.findings) == 1 for r in fold(demo.findings, every=True))


def test_the_header_states_waived_skipped_and_incomplete(demo: AuditResult) -> None:
    doc = {
        "waivers": [
            {
                "code": "GPU003",
                "namespace": "batch",
                "reason": "nightly pool",
                "expires": "2099-01-01",
            }
        ]
    }
    waived = demo_result(waivers=tuple(parse_waivers(doc)))
    partial = dataclasses.replace(
        waived,
        skipped=(Skipped("GPU030", "no topology files"),),
        complete=False,
        incomplete_reasons=("Kubernetes pods: forbidden",),
    )
    text = table_text(partial, width=100)
    head = text.split("\n\n")[0]  # the header, up to the first blank line
    # Every GPU003 finding of namespace batch is waived; GPU030 counts as a check, skipped.
    n = sum(f.code == "GPU003" and f.resource.namespace == "batch" for f in demo.findings)
    kept, checks = len(demo.findings) - n, len(demo.checks_run) + 1
    assert f"{kept} findings in 67 rows, {n} waived, 1 of {checks} checks skipped" in head
    assert "data INCOMPLETE" in head and "INCOMPLETE: Kubernetes pods: forbidden" in head
    assert f"Waived ({n} findings):" in text and f"GPU003 namespace=batch: {n} findings" in text
    assert "Skipped checks (their data is missing):\n  GPU030: no topology files" in text
    res = runner.invoke(app, ["scan", "--demo"], env={"COLUMNS": "100"})
    clean = f"{len(demo.findings)} findings in 70 rows, 0 waived, 0 of {len(demo.checks_run)}"
    assert f"{clean} checks skipped, data complete" in res.stdout


def test_the_stderr_summary_mentions_waived_and_skipped(tmp_path: Path, demo: AuditResult) -> None:
    cfg = tmp_path / "gpuaudit.toml"
    cfg.write_text(
        '[[waivers]]\ncode = "GPU003"\nnamespace = "batch"\nreason = "pool"\nexpires = 2099-01-01\n'
    )
    res = runner.invoke(app, ["scan", "--demo", "-f", "json", "--config", str(cfg)])
    n = sum(f.code == "GPU003" and f.resource.namespace == "batch" for f in demo.findings)
    # Waived findings still count in the idle GPU-hours (the summary's figures are the audit's).
    assert res.stderr.startswith(
        f"gpuaudit: {len(demo.findings) - n} findings ({n} waived), "
        f"{demo.summary.idle_gpu_hours:,.0f} idle GPU-hours"
    )
    assert res.stderr.rstrip().endswith(f"{len(demo.checks_run)} checks ran, 0 skipped")


def test_the_readme_shows_the_80_column_capture(
    captures: dict[int, str], update_goldens: bool
) -> None:
    """The README's example is the 80-column capture up to the first finding written out in
    full (`--update-goldens` rewrites it too)."""
    path = ROOT / "README.md"
    readme = path.read_text(encoding="utf-8")
    intro = "`gpuaudit scan --demo` in an 80-column terminal"
    before, after = readme.split(intro)
    head, block, tail = after.split("```", 2)
    lines = captures[80].splitlines()
    second = next(i for i, line in enumerate(lines) if line.startswith("#2 "))
    want = "\n" + "\n".join([*lines[: second - 1], "..."]) + "\n"
    if update_goldens:
        path.write_text(before + intro + head + "```" + want + "```" + tail, encoding="utf-8")
        block = want
    assert block == want
    assert len(block.splitlines()) > 40


def test_names_from_the_cluster_cannot_drive_the_terminal(demo: AuditResult) -> None:
    f = demo.findings[3]
    evil = dataclasses.replace(
        f, resource=dataclasses.replace(f.resource, name="x\x1b[2J\x1b]0;t\x07[bold]y[/bold]")
    )
    bad = dataclasses.replace(demo, findings=(evil,), cluster="c\x1b[31m")
    console = Console(width=80, force_terminal=True, color_system="truecolor")
    with console.capture() as cap:
        print_table(bad, console)
    out = cap.get()
    assert "\x1b[2J" not in out and "\x1b]0;" not in out and "\x1b[31mc" not in out
    plain = table_text(bad, width=80)
    assert "gpuaudit: c\\x1b[31m" in plain and "\\x1b[2J" in re.sub(r"\s+", "", plain)
