"""The CI contract: JSON schema, determinism, baselines, waivers, JUnit."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.support.paths import ROOT

runner = CliRunner()
SCHEMA = json.loads((ROOT / "docs" / "report.schema.json").read_text())


def _json(*args: str, code: int = 0) -> dict[str, Any]:
    res = runner.invoke(app, ["scan", "--demo", "-f", "json", "-q", *args])
    assert res.exit_code == code, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def test_report_matches_the_published_schema() -> None:
    jsonschema.validate(_json(), SCHEMA)


def test_two_runs_are_byte_identical_apart_from_generated_at() -> None:
    a = runner.invoke(app, ["scan", "--demo", "-f", "json", "-q"]).stdout
    b = runner.invoke(app, ["scan", "--demo", "-f", "json", "-q"]).stdout

    def strip(text: str) -> str:
        return "\n".join(ln for ln in text.splitlines() if '"generated_at"' not in ln)

    assert strip(a) == strip(b)


def _baseline(tmp_path: Path, drop: str, worsen: str = "") -> Path:
    """An earlier report: the demo's own, minus one finding and with another smaller."""
    doc = _json()
    doc["findings"] = [f for f in doc["findings"] if f["resource"]["name"] != drop]
    for f in doc["findings"]:
        if worsen and f["resource"]["name"] == worsen:
            f["impact"]["gpu_hours"] = f["impact"]["gpu_hours"] / 3
    doc["findings"].append(
        {
            "code": "GPU001",
            "fingerprint": "GPU001|Pod|gone|old-job",
            "severity": "high",
            "resource": {
                "kind": "Pod",
                "namespace": "gone",
                "name": "old-job",
                "node": "n",
                "gpus": 1,
            },
            "message": "old",
            "impact": {"gpu_hours": 5, "cost": 1},
        }
    )
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(doc))
    return path


def test_baseline_marks_new_worse_resolved_and_gates_on_new_only(tmp_path: Path) -> None:
    first = _json()["findings"]
    new_one = next(f for f in first if f["severity"] == "high")
    worse_one = next(f for f in first if f["severity"] == "medium")
    base = _baseline(tmp_path, new_one["resource"]["name"], worse_one["resource"]["name"])
    doc = _json("--baseline", str(base), "--fail-on", "high", code=1)
    jsonschema.validate(doc, SCHEMA)
    status = {f["resource"]["name"]: f["status"] for f in doc["findings"]}
    assert status[new_one["resource"]["name"]] == "new"
    assert status[worse_one["resource"]["name"]] == "worse"
    assert doc["comparison"]["new"] == 1
    assert [r["resource"]["name"] for r in doc["comparison"]["resolved"]] == ["old-job"]
    # Only a new finding at or above --fail-on fails the build: the same report as baseline
    # passes even though it holds high findings.
    same = tmp_path / "same.json"
    same.write_text(json.dumps(_json()))
    assert (
        runner.invoke(
            app, ["scan", "--demo", "-q", "--baseline", str(same), "--fail-on", "high"]
        ).exit_code
        == 0
    )
    assert runner.invoke(app, ["scan", "--demo", "-q", "--fail-on", "high"]).exit_code == 1


def test_bad_baseline_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "b.json"
    bad.write_text("[1, 2]")
    res = runner.invoke(app, ["scan", "--demo", "--baseline", str(bad)])
    assert res.exit_code == 2 and "not a gpuaudit JSON report" in res.output


def test_waivers_suppress_count_and_list_and_expired_ones_warn(tmp_path: Path) -> None:
    doc = _json()
    target = next(f for f in doc["findings"] if f["code"] == "GPU003")
    idle = next(f for f in doc["findings"] if f["code"] == "GPU001")
    cfg = tmp_path / "gpuaudit.toml"
    cfg.write_text(
        "[[waivers]]\n"
        f'code = "GPU003"\nnamespace = "{target["resource"]["namespace"]}"\n'
        'reason = "nightly batch pool, reviewed"\nexpires = 2099-01-01\n'
        "[[waivers]]\n"
        f'code = "GPU001"\nresource = "{idle["resource"]["namespace"]}/'
        f'{idle["resource"]["name"]}"\n'
        'reason = "old exception"\nexpires = 2020-01-01\n'
        "[[waivers]]\n"
        'code = "GPU021"\nselector = "app=embed-stale-0"\n'
        'reason = "by label"\nexpires = 2099-01-01\n'
    )
    out = _json("--config", str(cfg))
    jsonschema.validate(out, SCHEMA)
    assert not any(
        f["code"] == "GPU003" and f["resource"]["namespace"] == target["resource"]["namespace"]
        for f in out["findings"]
    )
    gpu003 = [f for f in doc["findings"] if f["code"] == "GPU003"]
    labelled = [
        f
        for f in doc["findings"]
        if f["code"] == "GPU021" and f["resource"]["name"].startswith("embed-stale-0")
    ]
    assert out["suppressed_count"] == len(gpu003) + len(labelled) == len(out["suppressed"])
    assert all(s["waiver"]["reason"] for s in out["suppressed"])
    assert any(f["resource"]["name"] == idle["resource"]["name"] for f in out["findings"])
    assert any("expired on 2020-01-01" in w for w in out["warnings"])


def test_waiver_without_expiry_is_a_config_error(tmp_path: Path) -> None:
    cfg = tmp_path / "gpuaudit.toml"
    cfg.write_text('[[waivers]]\ncode = "GPU001"\nreason = "x"\n')
    res = runner.invoke(app, ["scan", "--demo", "--config", str(cfg)])
    assert res.exit_code == 2 and "expiry date" in res.output


@pytest.mark.parametrize("extra", [[], ["--baseline"]])
def test_junit_is_valid_and_counts_failures(extra: list[str], tmp_path: Path) -> None:
    args = ["scan", "--demo", "-q", "-f", "junit"]
    if extra:
        args += [extra[0], str(_baseline(tmp_path, "nothing"))]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    root = ET.fromstring(res.stdout)
    suite = root.find("testsuite")
    assert suite is not None
    failures = suite.findall("testcase/failure")
    assert len(failures) == len(_json()["findings"])
    assert int(suite.get("failures", "0")) >= 1
