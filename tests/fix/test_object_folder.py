"""The folder with a new object (a KEDA ScaledObject) beside a pod template patch: the object's
file, `resources:` in the kustomization (patches stay under `patches:`), `kubectl apply` in
apply.sh, the README; and an overlay built with the real kubectl holds both."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped,unused-ignore]

from gpuaudit.fix import migslice, parttime
from gpuaudit.fix.changes import Plan
from gpuaudit.fix.directory import About, files, write
from gpuaudit.fix.plans import _validated
from tests.fix.test_directory import _as_read, _kubectl, _kustomize_version
from tests.fix.test_migslice import context as mig_context
from tests.fix.test_migslice import oversized
from tests.fix.test_parttime import LLM, part_time
from tests.fix.test_parttime import context as keda_context

ABOUT = About("prod-1", "2026-11-24T00:00:00Z to 2026-12-01T00:00:00Z (168 h)", "the demo")


def _plan() -> Plan:
    so = parttime.changes(
        [part_time("embed-0", [1, 2])], keda_context([("ml", "embed-0")], "Europe/Berlin")
    )[0]
    pair = [oversized("llm-5d9f-a", "3g.40gb", 3 / 7), oversized("llm-5d9f-b", "3g.40gb", 3 / 7)]
    patch = migslice.changes(pair, mig_context(LLM))[0]
    kept = [_validated(c, "1.34")[0] for c in so + patch]
    assert all(kept)
    return Plan(tuple(c for c in kept if c is not None), {}, "Kubernetes 1.34, for the test")


def test_a_new_object_is_a_resource_of_the_component_and_applied_by_apply_sh() -> None:
    plan = _plan()
    obj, patch = plan.changes
    texts = files(plan, ABOUT)
    assert {obj.file, patch.file} <= set(texts)
    head = texts[obj.file].splitlines()
    assert head[0] == (
        "# gpuaudit fix: Scale StatefulSet ml/embed to zero outside 01:30-04:00 Europe/Berlin "
        "(KEDA cron)"
    )
    assert "# validated: this object, against KEDA v2.20.2 CRD" in head
    assert any(line.startswith("# note: schedule: 01:30-04:00 Europe/Berlin") for line in head)
    assert yaml.safe_load(texts[obj.file]) == obj.body
    kustomization = yaml.safe_load(texts["kustomization.yaml"])
    assert kustomization["resources"] == [obj.file]
    assert [p["path"] for p in kustomization["patches"]] == [patch.file]
    assert f'k apply -f "$here/{obj.file}"' in texts["apply.sh"]
    assert f'--type strategic --patch-file "$here/{patch.file}"' in texts["apply.sh"]
    assert f"`{obj.file}`" in texts["README.md"] and "Needs KEDA installed" in texts["README.md"]


@pytest.mark.server
def test_an_overlay_holds_the_new_object_and_the_patched_template(tmp_path: Path) -> None:
    if _kustomize_version(tmp_path) < (3, 7):
        pytest.skip("this kubectl's kustomize is older than 3.7, which brought components")
    plan = _plan()
    obj, patch = plan.changes
    write(files(plan, ABOUT), tmp_path / "fix")
    base = tmp_path / "base"
    base.mkdir()
    (base / "deploy.yaml").write_text(yaml.safe_dump(_as_read(patch)))
    (base / "kustomization.yaml").write_text("resources: [deploy.yaml]\n")
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text("resources: [../base]\ncomponents: [../fix]\n")
    built = list(yaml.safe_load_all(_kubectl("kustomize", str(overlay), cwd=tmp_path)))
    by_kind = {d["kind"]: d for d in built}
    assert by_kind["ScaledObject"] == obj.body
    [container] = by_kind["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/mig-3g.40gb": "1"}
