"""Docs stay true to the code; partial data is never presented as complete."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from gpuaudit.sources.prometheus import catalogue as queries
from tests.support.paths import DEMO, ROOT

runner = CliRunner()


def test_snapshot_doc_lists_every_query() -> None:
    text = (ROOT / "docs" / "snapshot.md").read_text()
    for q in queries.CATALOGUE:
        assert f"`{q.id}`" in text, q.id
        full = "F" if q.changes else None
        assert q.promql(604800 if q.kind == "window" else 3600, "exported", full=full) in text, q.id


def test_readme_lists_every_check() -> None:
    from gpuaudit.checks import REGISTRY

    text = (ROOT / "README.md").read_text()
    for c in REGISTRY:
        assert f"| {c.code} |" in text, c.code


def test_incomplete_snapshot_says_so_everywhere(tmp_path: Path) -> None:
    snap = snapshot.read(DEMO)
    snap = snap.with_manifest(
        complete=False,
        incomplete_reasons=("the backend answered act_sum in part: store down",),
    )
    path = tmp_path / "partial.json.gz"
    snapshot.write(snap, path)
    table = runner.invoke(app, ["scan", "--snapshot", str(path), "-q"], env={"COLUMNS": "200"})
    assert table.exit_code == 0
    assert "INCOMPLETE" in table.stdout and "store down" in table.stdout
    doc = json.loads(
        runner.invoke(app, ["scan", "--snapshot", str(path), "-q", "-f", "json"]).stdout
    )
    assert doc["complete"] is False and doc["incomplete_reasons"]
    strict = runner.invoke(app, ["scan", "--snapshot", str(path), "-q", "--strict"])
    assert strict.exit_code == 2 and "incomplete" in strict.output
    assert runner.invoke(app, ["scan", "--demo", "-q", "--strict"]).exit_code == 0
