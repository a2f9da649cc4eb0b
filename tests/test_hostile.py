"""Names from the cluster are data: they cannot inject terminal escapes, Rich markup or HTML."""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from tests.factories import Series, gpu_labels, make_pod
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


def _hidden_characters() -> list[str]:
    """Every character of Unicode categories Cc and Cf (and the line and paragraph
    separators), as this Python knows them: U+200E, U+200F and U+061C among them."""
    return [
        chr(c)
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in ("Cc", "Cf", "Zl", "Zp")
    ]


HIDDEN = _hidden_characters()


@pytest.fixture(scope="module")
def invisible_snapshot(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Every control and format character, in twenty-character pieces, planted in pod and
    namespace names, a node, a GPU model, a pod label, the cluster, the manifest's warnings and
    reasons, an XID message and a resolved finding of an earlier report."""
    tmp = tmp_path_factory.mktemp("invisible")
    pieces = ["".join(HIDDEN[i : i + 20]) for i in range(0, len(HIDDEN), 20)]
    series, pods = [], []
    for i, piece in enumerate(pieces):
        name, ns = f"p{i}-{piece}", f"ns{i}-{piece[::-1]}"
        labels = gpu_labels(
            uuid=f"GPU-{i}", gpu=str(i % 8), pod=name, namespace=ns, host=f"n{i // 8}-{piece}"
        )
        labels["modelName"] = f"H100-{piece}"
        series.append(Series(labels, act=[0.0] * 8, xids=[79] if i == 0 else []))
        pods.append(make_pod(name, namespace=ns, node=f"n{i // 8}-{piece}", labels={"t": piece}))
    snap = make_snapshot(series, hours=8, pods=pods)
    xid = snap.prometheus["xid_max"][0]["body"]["data"]["result"][0]["metric"]
    xid["err_msg"] = "fallen off the bus" + pieces[0]
    snap = snap.with_manifest(
        cluster="c-" + pieces[1],
        warnings=tuple(f"w{i}-{p}" for i, p in enumerate(pieces)),
        complete=False,
        incomplete_reasons=tuple(f"r{i}-{p}" for i, p in enumerate(pieces)),
    )
    path = tmp / "invisible.json"
    snapshot.write(snap, path)
    res = runner.invoke(app, ["scan", "--snapshot", str(path), "-f", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    gone = dict(doc["findings"][0])
    gone.update(fingerprint="GPU001|Pod|old|gone", message="was here " + pieces[2])
    gone["resource"] = {"kind": "Pod", "namespace": "old-" + pieces[3], "name": pieces[4]}
    doc["findings"].append(gone)
    previous = tmp / "previous.json"
    previous.write_text(json.dumps(doc))
    return path, previous


@pytest.mark.parametrize("fmt", ["table", "markdown", "html", "junit"])
def test_every_control_and_format_character_is_shown_escaped(
    invisible_snapshot: tuple[Path, Path], fmt: str
) -> None:
    """Issue 20: U+200E, U+200F and U+061C reached the table, Markdown, HTML and JUnit (only
    U+202A-202E and U+2066-2069 were neutralised). No Cc or Cf character reaches any of them
    now, other than the report's own line breaks; each is shown as its escape."""
    path, previous = invisible_snapshot
    args = ["scan", "--snapshot", str(path), "-f", fmt, "--group-by-label", "t"]
    res = runner.invoke(app, [*args, "--previous", str(previous)], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    out = res.stdout
    leaked = {f"U+{ord(c):04X}" for c in set(out) & set(HIDDEN) if c != "\n"}
    assert not leaked, f"{fmt} shows these as themselves: {sorted(leaked)[:20]}"
    for mark in ("\\u200e", "\\u200f", "\\u061c", "\\u202e", "\\x1b"):
        assert mark in out.replace("\\\\", "\\"), mark
