"""`--history DIR` (the weekly cron job's): each report kept under its window's end, the newest
earlier one read as last week's, the last `--history-keep` kept and only gpuaudit's own files
removed, never through a link; a corrupt file is one warning; the trend over the kept weeks in
Markdown and HTML; options that cannot apply refused. The CronJob and the PersistentVolumeClaim
that holds the history validate against Kubernetes' schema."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuaudit.app.history import end_of, name_of
from gpuaudit.cli import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
DEMO_END = "20261123T000000Z"


def _scan(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, ["scan", "--demo", "-q", *args])
    return res.exit_code, res.stderr


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("h") / "r.json"
    code, err = _scan("-f", "json", "-o", str(out))
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def _week(doc: dict[str, Any], days_before: int, allocated: float) -> dict[str, Any]:
    """The demo's report moved `days_before` days back, with its allocated GPU-hours."""
    end = datetime(2026, 11, 23) - timedelta(days=days_before)
    start = end - timedelta(days=7)
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    week = json.loads(json.dumps(doc))
    week["window"] = {"start": start.strftime(fmt), "end": end.strftime(fmt), "hours": 168}
    week["summary"]["allocated_gpu_hours"] = allocated
    return week


def _put(folder: Path, doc: dict[str, Any]) -> None:
    end = doc["window"]["end"].replace("-", "").replace(":", "")
    (folder / f"gpuaudit-{end}.json").write_text(json.dumps(doc, indent=2) + "\n")


def test_names_sort_by_the_window_end() -> None:
    assert name_of(1795392000.0) == f"gpuaudit-{DEMO_END}.json"
    assert end_of(f"gpuaudit-{DEMO_END}.json") == 1795392000.0
    assert end_of("gpuaudit-20261123.json") is None and end_of("notes.json") is None


def test_the_history_keeps_reads_and_prunes(tmp_path: Path, demo_report: dict[str, Any]) -> None:
    hist = tmp_path / "hist"
    hist.mkdir()
    two_weeks, last_week = _week(demo_report, 14, 60000.0), _week(demo_report, 7, 61000.0)
    last_week["findings"] = last_week["findings"][:-2]  # two findings are new this week
    for doc in (_week(demo_report, 21, 59000.0), two_weeks, last_week):
        _put(hist, doc)
    (hist / "notes.txt").write_text("mine")
    (hist / "gpuaudit-20261020T000000Z.json").write_text("not gpuaudit's")  # left alone
    os.symlink("/etc/hostname", hist / "gpuaudit-20261019T000000Z.json")  # never followed
    md = tmp_path / "r.md"
    code, err = _scan(
        "--history", str(hist), "--history-keep", "3", "-f", "markdown", "-o", str(md)
    )
    assert code == 0, err
    text = md.read_text()
    # Last week's report, by name, is the previous one.
    assert "Since gpuaudit-20261116T000000Z.json (to 2026-11-16T00:00:00Z): 0 fixed;" in text
    assert "2 new." in text
    assert text.index("## Since last week") < text.index("## The last 3 weeks")
    assert text.index("## The last 3 weeks") < text.index("## Findings")
    table = text.split("## The last 3 weeks")[1].split("\n\n")[1].splitlines()
    assert [row.split(" | ")[0] for row in table[2:]] == [
        "| 2026-11-09 00:00",
        "| 2026-11-16 00:00",
        "| 2026-11-23 00:00",
    ]
    assert table[2].split(" | ")[1] == "60,000" and table[3].split(" | ")[1] == "61,000"
    # This week kept; the oldest gpuaudit report beyond three removed; nothing else touched.
    names = sorted(os.listdir(hist))
    assert names == [
        "gpuaudit-20261019T000000Z.json",
        "gpuaudit-20261020T000000Z.json",
        "gpuaudit-20261109T000000Z.json",
        "gpuaudit-20261116T000000Z.json",
        f"gpuaudit-{DEMO_END}.json",
        "notes.txt",
    ]
    kept = json.loads((hist / f"gpuaudit-{DEMO_END}.json").read_text())
    assert kept["comparison"]["against"] == "gpuaudit-20261116T000000Z.json"
    assert len(kept["comparison"]["still_open"]) == len(last_week["findings"])
    assert (hist / "gpuaudit-20261020T000000Z.json").read_text() == "not gpuaudit's"
    # The same window again: the kept report is not replaced, and the run says so.
    code, err = _scan("--history", str(hist), "-f", "json", "-o", str(tmp_path / "again.json"))
    assert code == 2 and f"already holds gpuaudit-{DEMO_END}.json" in err


def test_a_corrupt_history_file_is_one_warning(tmp_path: Path, demo_report: dict[str, Any]) -> None:
    hist = tmp_path / "hist"
    hist.mkdir()
    _put(hist, _week(demo_report, 14, 60000.0))
    (hist / "gpuaudit-20261116T000000Z.json").write_text('{"schema_version": "1.6", "findi')
    out = tmp_path / "r.json"
    code, err = _scan("--history", str(hist), "-f", "json", "-o", str(out))
    assert code == 0, err
    doc = json.loads(out.read_text())
    warned = [w for w in doc["warnings"] if "gpuaudit-20261116T000000Z.json" in w]
    assert len(warned) == 1 and "left out of the trend" in warned[0]
    # The newest readable earlier report is the previous one.
    assert doc["comparison"]["against"] == "gpuaudit-20261109T000000Z.json"


def test_the_html_report_draws_the_trend(tmp_path: Path, demo_report: dict[str, Any]) -> None:
    hist = tmp_path / "hist"
    hist.mkdir()
    _put(hist, _week(demo_report, 7, 61000.0))
    out = tmp_path / "r.html"
    code, err = _scan("--history", str(hist), "-f", "html", "-o", str(out))
    assert code == 0, err
    page = out.read_text()
    since, weeks, findings = (
        page.index('<section id="since">'),
        page.index('<section id="weeks">'),
        page.index('<section id="findings"'),
    )
    assert since < weeks < findings
    assert 'aria-label="GPU-hours and findings over the kept weeks"' in page
    assert '<td>2026-11-16 00:00</td><td class="num">61,000</td>' in page


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--history-keep", "3"], "--history-keep applies only with --history DIR"),
        (["--history", "h", "--baseline", "b.json"], "use --baseline (CI gate) or --history"),
        (["--history", "h", "--history-keep", "0"], "--history-keep must be a whole number"),
    ],
)
def test_options_that_cannot_apply_are_refused(args: list[str], said: str) -> None:
    code, err = _scan(*args)
    assert code == 2 and said in err


def test_a_file_named_as_the_history_is_refused(tmp_path: Path) -> None:
    (tmp_path / "h").write_text("")
    code, err = _scan("--history", str(tmp_path / "h"))
    assert code == 2 and "is not a folder" in err


def test_previous_and_history_together_compare_with_previous(
    tmp_path: Path, demo_report: dict[str, Any]
) -> None:
    hist = tmp_path / "hist"
    hist.mkdir()
    _put(hist, _week(demo_report, 7, 61000.0))
    chosen = tmp_path / "chosen.json"
    chosen.write_text(json.dumps(_week(demo_report, 14, 60000.0)))
    out = tmp_path / "r.json"
    code, err = _scan(
        "--history", str(hist), "--previous", str(chosen), "-f", "json", "-o", str(out)
    )
    assert code == 0, err
    assert json.loads(out.read_text())["comparison"]["against"] == "chosen.json"
    assert (hist / f"gpuaudit-{DEMO_END}.json").is_file()


def test_the_cronjob_and_its_volume_validate() -> None:
    import kubernetes_validate

    cron = yaml.safe_load((ROOT / "deploy" / "cronjob.yaml").read_text())
    pvc = yaml.safe_load((ROOT / "deploy" / "pvc.yaml").read_text())
    for obj in (cron, pvc):
        kubernetes_validate.validate(obj, "1.31", strict=True)
    script = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert "--history" in script and "--previous" not in script
    volumes = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"]
    claim = next(v["persistentVolumeClaim"]["claimName"] for v in volumes if v["name"] == "reports")
    assert claim == pvc["metadata"]["name"]


def test_a_baseline_says_nothing_of_fixed_findings(
    tmp_path: Path, demo_report: dict[str, Any]
) -> None:
    """`--baseline` gates CI against an earlier run, often of the same window: it marks findings
    new or worse, and says nothing of what was fixed or saved."""
    base = tmp_path / "base.json"
    base.write_text(json.dumps(demo_report))
    out = tmp_path / "r.json"
    code, err = _scan("--baseline", str(base), "-f", "json", "-o", str(out))
    assert code == 0, err
    comparison = json.loads(out.read_text())["comparison"]
    assert "fixed" not in comparison and "realized_savings" not in comparison
    assert comparison["new"] == 0
