"""One collection, every output: `--report FORMAT=FILE` writes each report from the one audit,
before the exit code is decided; an audit of nothing is incomplete, says so loudly, and never
passes a gate; `--namespace` narrows a snapshot as a live scan narrows its collection."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.app import pipeline
from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.settings import settings_from
from gpuaudit.checks import by_code
from gpuaudit.cli import app
from gpuaudit.inventory import build
from tests.support.factories import snapshot as make_snapshot
from tests.support.paths import DEMO

runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [n for n in os.environ if n.startswith("GPUAUDIT_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The snapshot files the run read, in order."""
    seen: list[Path] = []
    real = pipeline.snapshot.read

    def read(path: Path, *a: Any, **kw: Any) -> snapshot.Snapshot:
        seen.append(path)
        return real(path, *a, **kw)

    monkeypatch.setattr(pipeline.snapshot, "read", read)
    return seen


ALL = ["json=r.json", "junit=r.xml", "markdown=r.md", "html=r.html", "table=r.txt"]


def test_every_report_is_written_from_one_collection_before_a_failing_gate(
    reads: list[Path],
) -> None:
    args = ["scan", "--demo", "-f", "json", "--fail-on", "high"]
    res = runner.invoke(app, [*args, *(a for r in ALL for a in ("--report", r))])
    assert res.exit_code == 1, res.output  # the gate fails ...
    assert reads == [DEMO]  # ... after one read of the data
    # ... and every report is there, all of the one audit (one generated_at).
    assert Path("r.json").read_text() == res.stdout
    doc = json.loads(res.stdout)
    suite = ET.parse("r.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("timestamp") == doc["generated_at"].removesuffix("Z")
    assert int(suite.get("failures", "")) == len(doc["findings"])
    assert f"Generated {doc['generated_at']}" in Path("r.md").read_text()
    assert doc["generated_at"] in Path("r.html").read_text()
    assert doc["findings"][0]["resource"]["name"][:20] in Path("r.txt").read_text()
    assert not list(Path().glob(".*.part")), "no partial file left behind"


def test_reports_from_the_environment_and_from_the_file(tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["scan", "--demo", "-q"], env={"GPUAUDIT_REPORT": "json=e.json junit=e.xml"}
    )
    assert res.exit_code == 0, res.output
    assert json.loads(Path("e.json").read_text())["findings"]
    assert Path("e.xml").read_text().startswith("<?xml")
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "g.toml").write_text('[scan]\nreport = ["markdown=out.md"]\n')
    res = runner.invoke(app, ["scan", "--demo", "-q", "--config", "conf/g.toml"])
    assert res.exit_code == 0, res.output
    assert (conf / "out.md").is_file(), "relative to the file's folder"


def test_a_report_that_cannot_be_written_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    Path("taken").mkdir()
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json", "--report", "json=taken"])
    assert res.exit_code == 2
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("gpuaudit: error: cannot write taken: ")
    res = runner.invoke(app, ["scan", "--demo", "-q", "--report", "json=no/such/dir/r.json"])
    assert res.exit_code == 2 and "cannot write no/such/dir/r.json" in res.output
    assert not list(tmp_path.rglob("*.part"))


def test_a_report_to_a_pipe_is_written_directly(tmp_path: Path) -> None:
    """A named pipe (as `/dev/stdout` or a process substitution) is written to, not replaced by
    a renamed file."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(pipe.read_text()), daemon=True)
    reader.start()
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json", "--report", f"json={pipe}"])
    reader.join(timeout=60)
    assert res.exit_code == 0, res.output
    assert stat.S_ISFIFO(pipe.stat().st_mode)
    assert json.loads(got[0]) == json.loads(res.stdout)


def test_the_summary_line_names_the_checks_that_ran_and_were_skipped() -> None:
    res = runner.invoke(app, ["scan", "--demo", "-f", "json"])
    doc = json.loads(res.stdout)
    line = res.stderr.strip().splitlines()[-1]
    ran, skipped = len(doc["checks_run"]), len(doc["skipped"])
    assert line.endswith(f"; {ran} checks ran, {skipped} skipped"), line


@pytest.fixture
def empty_snapshot(tmp_path: Path) -> Path:
    """A snapshot of a Prometheus that held no DCGM series (Kubernetes read, no GPU pods)."""
    path = tmp_path / "empty.json"
    snapshot.write(make_snapshot([], hours=24), path)
    return path


@pytest.mark.parametrize(
    ("gate", "code"),
    [
        ([], 0),
        (["--fail-on", "none"], 0),
        (["--strict"], 2),
        (["--fail-on", "low"], 2),
        (["--fail-on", "critical"], 2),
        (["--strict", "--fail-on", "high"], 2),
    ],
)
def test_an_audit_of_nothing_is_incomplete_loud_and_never_passes_a_gate(
    empty_snapshot: Path, gate: list[str], code: int
) -> None:
    res = runner.invoke(
        app,
        [
            "scan",
            "--snapshot",
            str(empty_snapshot),
            "-q",
            "-f",
            "json",
            "--report",
            "junit=g.xml",
            *gate,
        ],
    )
    assert res.exit_code == code, res.output
    doc = json.loads(res.stdout)
    assert doc["complete"] is False and doc["nothing_audited"] is True
    assert doc["findings"] == [] and doc["checks_run"] == []
    assert (
        "nothing was audited: no GPU appears in the DCGM data of the window"
        in (doc["incomplete_reasons"])
    )
    # Loud even with --quiet: the warning says the zero findings do not mean healthy GPUs.
    assert "WARNING: NOTHING WAS AUDITED" in res.stderr
    assert "do not mean healthy GPUs" in res.stderr
    if code == 2:
        assert "exit code 2: an audit that audited nothing never passes a gate" in res.stderr
    assert Path("g.xml").is_file(), "the reports are written whatever the exit code"


def test_the_summary_line_of_an_audit_of_nothing(empty_snapshot: Path) -> None:
    res = runner.invoke(app, ["scan", "--snapshot", str(empty_snapshot), "-f", "json"])
    n = len(json.loads(res.stdout)["skipped"])
    assert (
        f"0 findings, 0 idle GPU-hours, 0 USD wasted over 24 h; 0 checks ran, {n} skipped "
        "(INCOMPLETE: nothing was audited)"
    ) in res.stderr


def test_a_baseline_does_not_turn_an_audit_of_nothing_into_a_pass(
    empty_snapshot: Path,
) -> None:
    base = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json", "-o", "base.json"])
    assert base.exit_code == 0
    res = runner.invoke(
        app,
        [
            "scan",
            "--snapshot",
            str(empty_snapshot),
            "-q",
            "--baseline",
            "base.json",
            "--fail-on",
            "high",
        ],
    )
    assert res.exit_code == 2, res.output


def test_every_check_skipped_is_an_audit_of_nothing() -> None:
    why = "not read: --no-kubernetes"
    snap = snapshot.read(DEMO).with_manifest(objects={"pods": why, "nodes": why})
    snap = dataclasses.replace(snap, kubernetes={})
    gang = by_code("GPU010")
    assert gang is not None
    result = run_checks(build(snap), settings_from({}), checks=[gang])
    assert result.checks_run == () and len(result.skipped) == 1
    assert result.nothing_audited == (
        "nothing was audited: every check (1) was skipped for lack of data",
    )
    assert not result.complete
    # With data for it, the same check runs and the audit is complete.
    assert run_checks(build(snapshot.read(DEMO)), settings_from({}), checks=[gang]).complete


def test_namespace_narrows_a_snapshot_to_its_pods_after_the_join() -> None:
    """`--snapshot ... --namespace`: the audit is the namespaces' own, their figures those of the
    whole audit's rows for them (the series joined against every pod of the snapshot)."""

    def scan(*args: str) -> dict[str, Any]:
        res = runner.invoke(app, ["scan", "--snapshot", str(DEMO), "-q", "-f", "json", *args])
        assert res.exit_code == 0, res.output
        doc: dict[str, Any] = json.loads(res.stdout)
        return doc

    mine = ("ml-train", "batch")
    whole, narrow = scan(), scan("-n", "ml-train,batch")
    assert "namespaces" not in whole and narrow["namespaces"] == list(mine)
    rows = {r["key"]: r for r in whole["breakdown"]["by_namespace"]}
    idle = sum(rows[ns]["idle_gpu_hours"] for ns in mine)
    assert narrow["summary"]["idle_gpu_hours"] == pytest.approx(idle, abs=0.02)
    assert narrow["ledger"]["by_namespace"] == {
        ns: whole["ledger"]["by_namespace"][ns] for ns in mine
    }
    # Allocated: their measured GPU-hours (the breakdown's) and their pods' GPU-hours no series
    # names (h100-node-029's 8 GPUs of ml-train for 168 h); the ledger adds up to it.
    ledger = narrow["attribution"]
    unattributed = sum(v["gpu_hours"] for v in ledger["unattributed"].values())
    assert unattributed == 1344.0
    measured = sum(rows[ns]["allocated_gpu_hours"] for ns in mine)
    allocated = narrow["summary"]["allocated_gpu_hours"]
    assert allocated == pytest.approx(measured + unattributed, abs=0.02)
    attributed = sum(v["gpu_hours"] for v in ledger["attributed"].values())
    assert attributed + unattributed == pytest.approx(allocated, abs=0.02)
    assert narrow["summary"]["gpus_total"] < whole["summary"]["gpus_total"]
    for f in narrow["findings"]:
        ns = f["resource"]["namespace"]
        assert ns in mine or any(f"{m}/" in f["message"] for m in mine), f["message"]
    # Every finding of theirs the whole audit made, the same.
    theirs = [f for f in whole["findings"] if f["resource"]["namespace"] in mine]
    kept = {f["fingerprint"]: f["message"] for f in narrow["findings"]}
    assert theirs and all(kept.get(f["fingerprint"]) == f["message"] for f in theirs)


def test_namespace_on_the_demo_changes_the_audit_and_warns_on_an_unknown_one() -> None:
    def scan(*args: str) -> dict[str, Any]:
        res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json", *args])
        assert res.exit_code == 0, res.output
        doc: dict[str, Any] = json.loads(res.stdout)
        return doc

    whole, narrow = scan(), scan("-n", "ml-train")
    pods = {
        f["resource"]["namespace"]
        for f in narrow["findings"]
        if f["resource"]["kind"] == "Pod" and f["code"] in ("GPU010", "GPU050")
    }
    assert pods <= {"ml-train"}, pods  # findings that need the pod objects: ml-train only
    assert whole["findings"] != narrow["findings"]
    typo = scan("-n", "ml-trian")
    assert any(
        "--namespace ml-trian: no pod and no GPU series of this namespace in the window" in w
        for w in typo["warnings"]
    )
