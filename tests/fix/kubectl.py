"""A change applied with the real `kubectl patch --local` (offline) to its object as read,
compared with gpuaudit's own application of it, and validated."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

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
    env = {**os.environ, "HOME": str(tmp), "KUBECONFIG": str(tmp / "none")}
    args = ["patch", "--local", "-f", str(read), "--type", change.patch_type]
    done = subprocess.run(
        [require("kubectl"), *args, "--patch-file", str(patch), "-o", "yaml"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, (change.file, done.stderr)
    got: dict[str, Any] = yaml.safe_load(done.stdout)
    assert got == apply(dict(change.read), change.body, change.patch_type), change.file
    check(got, version)
    return got
