"""A change applied with the real `kubectl patch --local` (offline) to its object as read,
compared with gpuaudit's own application of it, and validated."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped,unused-ignore]

from gpuaudit.fix.changes import Change
from gpuaudit.fix.directory import _patch_file
from gpuaudit.fix.patching import apply
from gpuaudit.fix.validate import check
from tests.support.servers import require


def kubectl_patch(change: Change, tmp: Path, version: str = "1.34") -> dict[str, Any]:
    """The object as read with the change's patch file applied by `kubectl patch --local`;
    asserts it equals gpuaudit's result and validates."""
    assert change.read is not None
    read = tmp / f"read-{change.file}"
    read.write_text(yaml.safe_dump(dict(change.read)))
    patch = tmp / change.file
    patch.write_text(_patch_file(change))
    args = ["patch", "--local", "-f", str(read), "--type", change.patch_type]
    out = kubectl(*args, "--patch-file", str(patch), "-o", "yaml", cwd=tmp)
    got: dict[str, Any] = yaml.safe_load(out)
    assert got == apply(dict(change.read), change.body, change.patch_type), change.file
    check(got, version)
    return got


def kubectl(*args: str, cwd: Path) -> str:
    """The real kubectl's output, offline (no kubeconfig); asserts it succeeded."""
    env = {**os.environ, "HOME": str(cwd), "KUBECONFIG": str(cwd / "none")}
    done = subprocess.run(
        [require("kubectl"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def overlay(changes: list[Change], fix: Path, tmp: Path) -> list[dict[str, Any]]:
    """What `kubectl kustomize` builds from an overlay of the patched objects as read (a base)
    with the folder `fix` as a component; skips the test where kubectl's kustomize is older
    than 3.7, which brought components."""
    m = re.search(r"Kustomize Version: v(\d+)\.(\d+)", kubectl("version", "--client", cwd=tmp))
    if not m or (int(m.group(1)), int(m.group(2))) < (3, 7):
        pytest.skip("this kubectl's kustomize is older than 3.7, which brought components")
    base = tmp / "base"
    base.mkdir()
    reads = [c for c in changes if c.read is not None]
    for i, c in enumerate(reads):
        (base / f"{i}.yaml").write_text(yaml.safe_dump(dict(c.read or {})))
    (base / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": [f"{i}.yaml" for i in range(len(reads))]})
    )
    top = tmp / "overlay"
    top.mkdir()
    component = os.path.relpath(fix, top)  # kustomize takes relative paths only
    (top / "kustomization.yaml").write_text(f"resources: [../base]\ncomponents: [{component}]\n")
    return list(yaml.safe_load_all(kubectl("kustomize", str(top), cwd=tmp)))
