"""Names from the cluster are data: they cannot inject terminal escapes, Rich markup or HTML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from tests.factories import Series, gpu_labels
from tests.factories import snapshot as make_snapshot

runner = CliRunner()

HOSTILE = {
    "ansi": "evil-\x1b[2J\x1b[31mred\x1b[0m",
    "markup": "pod-[bold red]boom[/bold red]-[link=http://x]y[/link]",
    "html": "<script>alert(1)</script><img src=x onerror=alert(2)>",
    "newline": "line1\nline2\rline3",
    "long": "x" * 5000,
    "bidi": "abc\u202egnp.exe",
}


@pytest.fixture
def hostile_snapshot(tmp_path: Path) -> Path:
    series = [
        Series(
            gpu_labels(
                uuid=f"GPU-{i}", gpu=str(i), pod=name, namespace=f"ns-{key}", host="node-\x1b[5m"
            ),
            act=[0.0] * 8,
        )
        for i, (key, name) in enumerate(HOSTILE.items())
    ]
    snap = make_snapshot(series, hours=8)
    snap = snap.with_manifest(cluster="[red]cluster[/red]\x1b]0;title\x07")
    path = tmp_path / "hostile.json"
    snapshot.write(snap, path)
    return path


def test_table_shows_names_literally_and_harmlessly(hostile_snapshot: Path) -> None:
    res = runner.invoke(app, ["scan", "--snapshot", str(hostile_snapshot)], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "\x1b" not in out  # no escape sequence reaches the terminal
    assert "\\x1b[2J" in out  # shown as visible text instead
    assert "[bold red]boom[/bold red]" in out  # markup printed, not interpreted
    assert "<script>alert(1)</script>" in out
    assert "line1\\x0aline2" in out
    assert "\u202e" not in out
    assert "x" * 5000 not in out  # very long names are cut


def test_json_keeps_names_exact_and_escaped(hostile_snapshot: Path) -> None:
    res = runner.invoke(app, ["scan", "--snapshot", str(hostile_snapshot), "-f", "json"])
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.stdout and "\n" not in json.dumps(res.stdout)[1:-1].replace("\\n", "")
    doc = json.loads(res.stdout)
    names = {f["resource"]["name"] for f in doc["findings"]}
    assert names == set(HOSTILE.values())  # exact data for machines


def test_debug_log_redacts_authorization(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "--debug",
            "scan",
            "--prometheus-url",
            "http://127.0.0.1:9",
            "--prometheus-token",
            "tok-abc-123",
            "--timeout",
            "1",
            "--no-kubernetes",
            "-q",
        ],
    )
    assert res.exit_code == 2
    assert "tok-abc-123" not in res.output
    assert "<redacted>" in res.output
