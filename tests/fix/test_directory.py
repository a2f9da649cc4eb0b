"""The folder `gpuaudit fix` writes: its files, and how it refuses to overwrite anything. With
the real `kubectl` (offline): every patch applies to the object as read as gpuaudit applied it,
and the kustomize Component patches a base of those objects."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped,unused-ignore]

from gpuaudit.core.errors import GpuauditError
from gpuaudit.fix import drain, kueue, owned
from gpuaudit.fix.changes import Change, ChangeKind, Plan
from gpuaudit.fix.directory import About, files, write
from gpuaudit.fix.patching import apply
from gpuaudit.fix.plans import _validated
from gpuaudit.fix.validate import check
from tests.fix.conftest import context, idle, quota, sick
from tests.fix.kubectl import kubectl, overlay

ABOUT = About("prod-1", "2026-11-16T00:00:00Z to 2026-11-23T00:00:00Z (168 h)", "the demo")


def _plan() -> Plan:
    ctx = context(running=[("ml", "llm-5d9f-a"), ("ml", "train-x")])
    changes: list[Change] = []
    made, _ = owned.changes(
        [idle("GPU001", "llm-5d9f-a"), idle("GPU002", "train-x"), idle("GPU001", "scratch")], ctx
    )
    changes += made
    made, _ = kueue.changes(
        [
            quota(
                "idle_quota",
                system="Kueue",
                queue="team-a",
                flavor="h100",
                resource="nvidia.com/gpu",
                recommended_quota=6.0,
            )
        ],
        ctx,
    )
    changes += made
    changes += drain.changes([sick("node.1")], ctx)[0]
    kept = [_validated(c, "1.34")[0] for c in changes]
    assert all(kept)
    return Plan(tuple(c for c in kept if c is not None), {}, "Kubernetes 1.34, for the test")


def test_each_patch_file_names_its_finding_evidence_and_savings() -> None:
    plan = _plan()
    texts = files(plan, ABOUT, {"GPU001 1234abcd Pod ml/x": "a reason | with a pipe"})
    patches = [c for c in plan.changes if c.kind is ChangeKind.PATCH]
    assert sorted(texts) == sorted(
        [c.file for c in patches] + ["kustomization.yaml", "apply.sh", "commands.sh", "README.md"]
    )
    deploy = next(c for c in patches if c.target and c.target.kind == "Deployment")
    text = texts[deploy.file]
    head = text.splitlines()[:5]
    assert head[0] == "# gpuaudit fix: Scale Deployment ml/llm to zero"
    assert re.fullmatch(r"# finding: GPU001 [0-9a-f]{8} GPU001\|Pod\|ml\|llm-5d9f-a", head[1])
    assert head[2].startswith('# evidence: {\\"hours_held\\":168.0')
    assert head[3] == (
        "# saves: 168.0 GPU-hours and 336.00 USD per week (the window's wasted GPU-hours, at the "
        "window's rate)"
    )
    assert yaml.safe_load(text) == deploy.body
    kust = yaml.safe_load(texts["kustomization.yaml"])
    assert kust["kind"] == "Component"
    assert {
        "path": deploy.file,
        "target": {
            "group": "apps",
            "version": "v1",
            "kind": "Deployment",
            "name": "llm",
            "namespace": "ml",
        },
    } in kust["patches"]
    cq = next(p for p in kust["patches"] if p["target"]["kind"] == "ClusterQueue")
    assert cq["target"] == {
        "group": "kueue.x-k8s.io",
        "version": "v1beta2",
        "kind": "ClusterQueue",
        "name": "team-a",
    }
    assert "k cordon 'node.1'" not in texts["commands.sh"]  # a plain name needs no quotes
    assert "k cordon node.1\nk drain node.1 --ignore-daemonsets" in texts["commands.sh"]
    assert "# k delete pod scratch -n ml" in texts["commands.sh"]
    assert "KUBECONTEXT:?" in texts["commands.sh"] and "KUBECONTEXT:?" in texts["apply.sh"]
    assert (
        f'k patch deployments.apps llm -n ml --type strategic --patch-file "$here/{deploy.file}"'
        in texts["apply.sh"]
    )
    readme = texts["README.md"]
    assert "| Scale Deployment ml/llm to zero |" in readme and "drops its traffic" in readme
    assert "- GPU001 1234abcd Pod ml/x: a reason \\| with a pipe" in readme


def test_a_name_cannot_end_its_comment_line() -> None:
    plan = _plan()
    evil = next(c for c in plan.changes if c.kind is ChangeKind.PATCH)
    lead = evil.lead
    lead = type(lead)(**{**lead.__dict__, "evidence": {"owner": "x\n- op: remove\n"}})
    evil = type(evil)(**{**evil.__dict__, "findings": (lead,)})
    text = files(Plan((evil,), {}, ""), ABOUT)[evil.file]
    assert yaml.safe_load(text) == evil.body
    assert all(line.startswith("#") for line in text.splitlines()[:4])


def test_the_folder_is_new_or_empty_and_nothing_is_overwritten(tmp_path: Path) -> None:
    texts = {"a.yaml": "a: 1\n", "README.md": "hi\n"}
    written = write(texts, tmp_path / "new")
    assert sorted(p.name for p in written) == ["README.md", "a.yaml"]
    with pytest.raises(GpuauditError, match="the folder is not empty"):
        write(texts, tmp_path / "new")
    (tmp_path / "file").write_text("x")
    with pytest.raises(GpuauditError, match="it is a file"):
        write(texts, tmp_path / "file")
    os.symlink(tmp_path / "elsewhere", tmp_path / "link")
    with pytest.raises(GpuauditError, match="it is a link"):
        write(texts, tmp_path / "link")
    empty = tmp_path / "empty"
    empty.mkdir()
    write(texts, empty)
    with pytest.raises(GpuauditError, match="refusing to write a file named"):
        write({"../x": ""}, tmp_path / "other")


_kubectl = kubectl


def _kustomize_version(cwd: Path) -> tuple[int, ...]:
    out = _kubectl("version", "--client", cwd=cwd)
    m = re.search(r"Kustomize Version: v(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _as_read(change: Change) -> dict[str, Any]:
    assert change.read is not None
    return dict(change.read)


@pytest.mark.server
def test_every_patch_applies_with_kubectl_as_gpuaudit_applied_it_and_validates(
    tmp_path: Path,
) -> None:
    plan = _plan()
    texts = files(plan, ABOUT)
    for change in (c for c in plan.changes if c.kind is ChangeKind.PATCH):
        obj = tmp_path / f"read-{change.file}"
        obj.write_text(yaml.safe_dump(_as_read(change)))
        patch = tmp_path / change.file
        patch.write_text(texts[change.file])
        out = _kubectl(
            "patch",
            "--local",
            "-f",
            str(obj),
            "--type",
            change.patch_type,
            "--patch-file",
            str(patch),
            "-o",
            "yaml",
            cwd=tmp_path,
        )
        got = yaml.safe_load(out)
        assert got == apply(_as_read(change), change.body, change.patch_type), change.file
        check(got, "1.34")


@pytest.mark.server
def test_the_kustomization_is_a_component_an_overlay_applies(tmp_path: Path) -> None:
    plan = _plan()
    fix = tmp_path / "fix"
    write(files(plan, ABOUT), fix)
    built = overlay(list(plan.changes), fix, tmp_path)
    by_kind = {d["kind"]: d for d in built}
    assert by_kind["Deployment"]["spec"]["replicas"] == 0
    assert by_kind["Job"]["spec"]["suspend"] is True
    h100 = by_kind["ClusterQueue"]["spec"]["resourceGroups"][1]["flavors"][1]
    assert h100["resources"][0]["nominalQuota"] == 6
