"""`snapshot save` writes the snapshot's columnar side-file beside it, so that the first scan
of a saved snapshot already reads its answers as arrays; `--no-side-file` writes none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.snapshot import sidefile as columns
from tests.support.promserver import Backfilled
from tests.test_snapshot_columns import _read_without_text, _same

runner = CliRunner()


def _save(url: str, b: Backfilled, out: Path, *more: str) -> str:
    args = ["snapshot", "save", str(out), "--prometheus-url", url, "--no-kubernetes", *more]
    res = runner.invoke(app, [*args, "--window", f"{b.days}d", "--end", str(b.end)])
    assert res.exit_code == 0, res.output
    return res.stderr


def _report(path: Path) -> dict[str, Any]:
    res = runner.invoke(app, ["scan", "--snapshot", str(path), "-f", "json"])
    assert res.exit_code in (0, 1), res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    doc.pop("generated_at", None)
    return doc


def test_a_saved_snapshot_comes_with_its_side_file(
    prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuaudit import snapshot

    out = tmp_path / "s.json.gz"
    said = _save(prom_url, scenario_tsdb, out)
    side = columns.side_path(out)
    assert side.is_file() and f"side-file {side}" in said
    _same(snapshot.read(out, side_file=False), _read_without_text(out, monkeypatch))
    with_side = _report(out)
    side.unlink()
    assert _report(out) == with_side

    bare = tmp_path / "bare.json.gz"
    said = _save(prom_url, scenario_tsdb, bare, "--no-side-file")
    assert not columns.side_path(bare).exists() and "side-file" not in said
