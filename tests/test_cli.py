from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from gpuaudit import __version__
from gpuaudit.cli import app

runner = CliRunner()


def test_version() -> None:
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.stdout.strip() == f"gpuaudit {__version__}"


def test_table_output_has_summary_and_ranked_findings() -> None:
    res = runner.invoke(app, ["scan", "--demo"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "560 GPUs, allocated now" in out  # the demo's GPUs (fixtures/demo.snapshot.json.gz)
    assert "findings, ranked by wasted GPU-hours; risks listed apart" in out
    assert "GPU001" in out
    # A long name folds in the resource column at 80 columns.
    assert "GPU001+  search/rerank-cold-     336.0" in out
    assert "\n                       0-z99lp9bdxp-4mx8s\n" in out


def test_json_stdout_is_only_json() -> None:
    res = runner.invoke(app, ["scan", "--demo", "--format", "json"])
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert doc["schema_version"] == "1.6"
    assert set(doc) >= {"summary", "findings", "skipped", "warnings", "suppressed", "comparison"}
    f = doc["findings"][0]
    # `fix` too, for the findings of checks `gpuaudit fix` makes changes for (docs/fix.md).
    assert set(f) - {"fix"} == {
        "code",
        "fingerprint",
        "explain",
        "severity",
        "category",
        "resource",
        "message",
        "impact",
        "evidence",
        "recommendation",
        "primary",
        "related",
        "counted_in_total",
        "confidence",
        "targets",
        "drains",
        "owner",
    }
    assert set(f["owner"]) == {"name", "source", "contact"}
    assert set(f["resource"]) == {"kind", "namespace", "name", "node", "gpus"}
    assert set(f["impact"]) == {"gpu_hours", "cost"}
    # The waste, ranked by wasted GPU-hours after the risks (see tests/test_demo.py).
    ranks = [f["impact"]["gpu_hours"] for f in doc["findings"] if f["category"] == "waste"]
    assert ranks == sorted(ranks, reverse=True)


def test_output_file(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["scan", "--demo", "-f", "json", "-o", str(out), "-q"])
    assert res.exit_code == 0
    assert res.stdout == ""
    assert json.loads(out.read_text())["findings"]
    txt = tmp_path / "r.txt"
    assert runner.invoke(app, ["scan", "--demo", "-o", str(txt), "-q"]).exit_code == 0
    assert "\x1b[" not in txt.read_text() and "GPU001" in txt.read_text()


def test_fail_on_exit_codes(tmp_path: Path) -> None:
    assert runner.invoke(app, ["scan", "--demo", "--fail-on", "high", "-q"]).exit_code == 1
    # The demo's only critical findings are GPU070 (sick GPUs); waived, nothing is critical.
    assert runner.invoke(app, ["scan", "--demo", "--fail-on", "critical", "-q"]).exit_code == 1
    cfg = tmp_path / "gpuaudit.toml"
    cfg.write_text('[[waivers]]\ncode = "GPU070"\nreason = "RMA open"\nexpires = 2099-01-01\n')
    res = runner.invoke(
        app, ["scan", "--demo", "--fail-on", "critical", "-q", "--config", str(cfg)]
    )
    assert res.exit_code == 0
    bad = runner.invoke(app, ["scan", "--demo", "--fail-on", "bogus"])
    assert bad.exit_code == 2
    assert "unknown severity" in bad.output


def test_environment_variables_are_read(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        ["scan"],
        env={"GPUAUDIT_DEMO": "1", "GPUAUDIT_FORMAT": "json", "GPUAUDIT_FAIL_ON": "high"},
    )
    assert res.exit_code == 1
    assert json.loads(res.stdout)["findings"]


def test_errors_are_one_line_not_tracebacks(tmp_path: Path) -> None:
    missing = runner.invoke(app, ["scan", "--snapshot", str(tmp_path / "nope.json")])
    assert missing.exit_code == 2
    assert "does not exist" in missing.output
    assert "Traceback" not in missing.output
    garbage = tmp_path / "g.json"
    garbage.write_text("{not json")
    res = runner.invoke(app, ["scan", "--snapshot", str(garbage)])
    assert res.exit_code == 2 and "not valid JSON" in res.output
    other = tmp_path / "o.json"
    other.write_text('{"hello": 1}')
    res = runner.invoke(app, ["scan", "--snapshot", str(other)])
    assert res.exit_code == 2 and "not a gpuaudit snapshot" in res.output
    none = runner.invoke(app, ["scan"])
    assert none.exit_code == 2 and "--demo" in none.output


def test_config_file_prices_and_thresholds(tmp_path: Path) -> None:
    cfg = tmp_path / "gpuaudit.toml"
    cfg.write_text("[prices]\nH100 = 1.0\nL40S = 1.0\nA100 = 1.0\n[checks]\nidle_activity = 0.0\n")
    res = runner.invoke(app, ["scan", "--demo", "-f", "json", "--config", str(cfg)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [f for f in doc["findings"] if f["code"] == "GPU001"] == []
    assert doc["summary"]["wasted_cost"] == 0
    bad = tmp_path / "bad.toml"
    bad.write_text("[checks]\nnope = 1\n")
    res = runner.invoke(app, ["scan", "--demo", "--config", str(bad)])
    assert res.exit_code == 2 and "unknown setting checks.nope" in res.output


def test_checks_and_explain() -> None:
    res = runner.invoke(app, ["checks"])
    assert res.exit_code == 0 and "GPU001" in res.stdout
    res = runner.invoke(app, ["explain", "gpu001"])
    assert res.exit_code == 0
    for section in ("What it finds", "Why it matters", "How it decides", "What to do"):
        assert section in res.stdout
    assert runner.invoke(app, ["explain", "GPU999"]).exit_code == 2
