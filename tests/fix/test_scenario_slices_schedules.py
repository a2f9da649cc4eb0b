"""`gpuaudit fix` on a generated scenario (four days, so that GPU003 sees its daily pattern):
every planted part-time pod of a Deployment gets a KEDA ScaledObject in the time zone asked for,
the MIG slice under framebuffer pressure moves to the next profile a node offers (applied with
the real kubectl), and an oversized H100 gets no change, since no H100 node offers MIG slices."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped,unused-ignore]
from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.cli import app
from gpuaudit.fix.changes import ChangeKind
from gpuaudit.inventory import build
from gpuaudit.scenario.emit import to_snapshot
from gpuaudit.scenario.generator import Scenario, generate
from tests.fix.kubectl import kubectl_patch

runner = CliRunner()
ZONE = "Asia/Kolkata"
"""UTC+05:30 all year: the half hour shows in the schedule."""


@cache
def _scenario() -> tuple[Scenario, AuditResult]:
    sc = generate(60, 4, 7)
    return sc, run_checks(build(to_snapshot(sc)), Settings(timezone=ZONE))


def _planted(code: str) -> list[tuple[str, str]]:
    sc, _ = _scenario()
    return [(p["namespace"], p["name"]) for p in sc.truth["planted"].get(code, ())]


def test_each_part_time_deployment_gets_a_scaled_object_in_the_zone_asked_for() -> None:
    _, result = _scenario()
    planted = set(_planted("GPU003"))
    found = [f for f in result.findings if f.code == "GPU003"]
    assert {(f.resource.namespace, f.resource.name) for f in found} == planted
    for f in found:
        got = result.fixes.of(f)
        assert got is not None and got.kind is ChangeKind.OBJECT, (f.resource, got)
        change = next(c for c in result.fixes.changes if c.file == got.file)
        assert change.validated == "KEDA v2.20.2 CRD"
        spec = change.body["spec"]
        assert spec["scaleTargetRef"]["kind"] == "Deployment" and spec["minReplicaCount"] == 0
        # Busy 01:00-04:00 UTC: 00:30-04:00 UTC with the margin, 06:00-09:30 in Kolkata; the
        # serving cases 13:00-16:00 UTC: 18:00-21:30 (their prometheus trigger needs the
        # Prometheus URL, which a generated snapshot does not record).
        serving = f.resource.name in {c["pod"] for c in _scenario()[0].truth["serving_fixes"]}
        start, end = ("0 18 * * *", "30 21 * * *") if serving else ("0 6 * * *", "30 9 * * *")
        assert [t["metadata"] for t in spec["triggers"]] == [
            {"timezone": ZONE, "start": start, "end": end, "desiredReplicas": "1"}
        ]


@pytest.mark.server
def test_a_slice_under_pressure_moves_up_and_an_oversized_h100_gets_none(tmp_path: Path) -> None:
    _, result = _scenario()
    by_pod = {(f.code, f.resource.name): f for f in result.findings}
    assert ("serving", "llm-7b-int4-0") in _planted("GPU020")
    pressed = result.fixes.of(by_pod[("GPU020", "llm-7b-int4-0")])
    assert pressed is not None and pressed.kind is ChangeKind.PATCH
    change = next(c for c in result.fixes.changes if c.file == pressed.file)
    assert change.title == "Move StatefulSet serving/llm-7b-int4-0 from MIG 1g.10gb to MIG 2g.20gb"
    kubectl_patch(change, tmp_path, "1.37")
    oversized = result.fixes.of(by_pod[("GPU021", "embedder-0")])
    assert oversized is not None and oversized.kind is None
    assert oversized.reason.startswith("no node offers 1g.10gb of the NVIDIA H100 80GB HBM3")


def test_gpuaudit_fix_writes_the_scaled_objects_as_resources(tmp_path: Path) -> None:
    sc, result = _scenario()
    snap = tmp_path / "s.json.gz"
    snapshot.write(to_snapshot(sc), snap)
    out = tmp_path / "fix"
    res = runner.invoke(
        app, ["fix", "--snapshot", str(snap), "--timezone", ZONE, "-o", str(out), "-q"]
    )
    assert res.exit_code == 0, res.output
    objects = [c.file for c in result.fixes.changes if c.kind is ChangeKind.OBJECT]
    kustomization = yaml.safe_load((out / "kustomization.yaml").read_text())
    assert set(objects) <= set(kustomization["resources"])
    for name in objects:
        if name.startswith("GPU003-"):
            assert yaml.safe_load((out / name).read_text())["kind"] == "ScaledObject"
