"""`gpuaudit fix` on a generated scenario: the owner cases get the changes their truth says
(`gpuaudit.scenario.owner_cases`), every owner the generator emits is walked, and every patch
written applies with the real kubectl to the object as read and validates."""

from __future__ import annotations

import os
import subprocess
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
from gpuaudit.fix.patching import apply
from gpuaudit.fix.validate import check
from gpuaudit.inventory import build
from gpuaudit.inventory.owners import Outcome
from gpuaudit.scenario.emit import to_snapshot
from gpuaudit.scenario.generator import Scenario, generate
from tests.support.servers import require

runner = CliRunner()


@cache
def _scenario() -> tuple[Scenario, AuditResult]:
    sc = generate(60, 2, 7)
    inv = build(to_snapshot(sc))
    return sc, run_checks(inv, Settings())


def test_the_owner_cases_get_the_change_their_truth_says() -> None:
    sc, result = _scenario()
    by_pod = {
        (f.resource.namespace, f.resource.name): f for f in result.findings if f.code == "GPU001"
    }
    for entry in sc.truth["fixes"]:
        f = by_pod[(entry["namespace"], entry["name"])]
        got = result.fixes.of(f)
        assert got is not None, entry
        want = {"patch": ChangeKind.PATCH, "command": ChangeKind.COMMAND, "none": None}
        assert got.kind is want[entry["fix"]], (entry, got)
        if "target" in entry and got.target is not None:
            assert got.target.describe() == entry["target"], (entry, got)
        if entry["fix"] != "patch":
            assert got.reason, entry


def test_every_gpu_pod_of_an_owner_the_generator_emits_is_walked_to_the_top() -> None:
    sc = generate(60, 2, 7)
    inv = build(to_snapshot(sc))
    outcomes = {}
    for p in sc.pods:
        if p.alive and p.owner_kind in ("ReplicaSet", "StatefulSet", "Job"):
            outcomes[(p.namespace, p.name)] = inv.owners.walk(p.namespace, p.name)
    unread = {k for k, w in outcomes.items() if w.outcome is not Outcome.RESOLVED}
    assert {n.rsplit("-", 1)[0] for _, n in unread} == {"ghost-llm-7c9d8f6b5"}
    tops = {w.target.kind for w in outcomes.values() if w.target is not None}
    assert {"Deployment", "StatefulSet", "Job", "CronJob", "Notebook", "InferenceService"} <= tops


@pytest.mark.server
def test_gpuaudit_fix_writes_a_folder_whose_patches_apply_with_kubectl(tmp_path: Path) -> None:
    sc, result = _scenario()
    snap = tmp_path / "s.json.gz"
    snapshot.write(to_snapshot(sc), snap)
    out = tmp_path / "fix"
    res = runner.invoke(app, ["fix", "--snapshot", str(snap), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "written to" in res.stderr
    names = {p.name for p in out.iterdir()}
    assert {"kustomization.yaml", "README.md", "commands.sh", "apply.sh"} <= names
    patches = [c for c in result.fixes.changes if c.kind is ChangeKind.PATCH]
    assert {c.file for c in patches} <= names
    kubectl = require("kubectl")
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "none")}
    for c in patches:
        assert c.read is not None
        read = tmp_path / f"read-{c.file}"
        read.write_text(yaml.safe_dump(dict(c.read)))
        done = subprocess.run(
            [
                kubectl,
                "patch",
                "--local",
                "-f",
                str(read),
                "--type",
                c.patch_type,
                "--patch-file",
                str(out / c.file),
                "-o",
                "yaml",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, (c.file, done.stderr)
        got = yaml.safe_load(done.stdout)
        assert got == apply(dict(c.read), c.body, c.patch_type)
        check(got, "1.37")
