"""Every output of a scan is tried: one that cannot be written (a parent that is a file, a name
too long) is one clear line each, after the others were written and the webhook posted, and the
run ends with exit code 2. A failing gate says why, and an earlier report that is a snapshot is
named as one."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.support.paths import DEMO

runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [n for n in os.environ if n.startswith("GPUAUDIT_")]:
        monkeypatch.delenv(name)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def posts() -> Iterator[tuple[str, list[bytes]]]:
    """A loopback webhook: its URL and the bodies posted to it."""
    got: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/abc", got
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("gpuaudit: error: ")]


def test_an_unwritable_target_does_not_drop_the_later_ones_nor_the_webhook(
    tmp_path: Path, posts: tuple[str, list[bytes]]
) -> None:
    url, got = posts
    (tmp_path / "plain").write_text("a file, not a folder")
    too_long = tmp_path / ("n" * 300 + ".json")
    res = runner.invoke(
        app,
        [
            "scan",
            "--demo",
            "-q",
            "-f",
            "json",
            "-o",
            str(tmp_path / "plain" / "report.json"),
            "--report",
            f"markdown={tmp_path / 'report.md'}",
            "--report",
            f"json={too_long}",
            "--report",
            f"html={tmp_path / 'report.html'}",
            "--webhook",
            url,
        ],
    )
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and "internal error" not in res.output
    assert (tmp_path / "report.md").read_text().startswith("# GPU audit")
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert len(got) == 1  # the webhook was posted all the same
    assert _errors(res.stderr) == [
        f"gpuaudit: error: cannot write {tmp_path / 'plain' / 'report.json'}: a part of its path "
        "is a file, not a folder; choose another path",
        f"gpuaudit: error: cannot write {too_long}: the name is too long for the file system "
        "(305 bytes); choose a shorter one",
    ]
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")]


def test_a_valid_name_of_250_bytes_is_written(tmp_path: Path) -> None:
    """The temporary file beside it once took the name plus a dozen bytes: past the 255 the
    file system allows."""
    out = tmp_path / ("r" * 245 + ".json")
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["findings"]


def test_an_output_in_a_missing_folder_is_one_clear_line(tmp_path: Path) -> None:
    out = tmp_path / "nowhere" / "r.json"
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json", "-o", str(out)])
    assert res.exit_code == 2
    assert _errors(res.stderr) == [
        f"gpuaudit: error: cannot write {out}: its folder {out.parent} does not exist; create "
        "it first"
    ]


def test_an_output_that_is_a_folder_is_one_clear_line(tmp_path: Path) -> None:
    res = runner.invoke(app, ["scan", "--demo", "-q", "--report", f"json={tmp_path}"])
    assert res.exit_code == 2
    assert _errors(res.stderr) == [
        f"gpuaudit: error: cannot write {tmp_path}: it is a folder; name a file"
    ]


def test_an_output_is_never_called_not_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report file that exists but cannot be read (write-only) is replaced; one that cannot
    be written is said to be read-only. (Tests run as root, which may read and write
    anything: `os.access` says what another user would be told.)"""
    out = tmp_path / "r.json"
    out.write_text("{}")
    real = os.access

    def access(path: Any, mode: int, *args: Any, **kw: Any) -> bool:
        if os.fspath(path) == str(out):
            return mode != os.R_OK
        return real(path, mode, *args, **kw)

    monkeypatch.setattr(os, "access", access)
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["findings"]
    monkeypatch.setattr(os, "access", lambda path, mode, *a, **k: False)
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json", "-o", str(out)])
    assert res.exit_code == 2
    (line,) = _errors(res.stderr)
    assert "not readable" not in line
    assert line == (
        f"gpuaudit: error: cannot write {out}: the file is read-only; choose a path you can "
        "write to"
    )


def test_a_failing_gate_says_why(tmp_path: Path) -> None:
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json", "--fail-on", "high"])
    assert res.exit_code == 1
    report = json.loads(res.stdout)
    n = sum(1 for f in report["findings"] if f["severity"] in ("critical", "high"))
    assert res.stderr.splitlines() == [f"gpuaudit: failing: {n} findings at or above high"]


def test_a_failing_gate_against_a_baseline_counts_the_new(tmp_path: Path) -> None:
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json"])
    report = json.loads(res.stdout)
    high = [f for f in report["findings"] if f["severity"] in ("critical", "high")]
    report["findings"] = [f for f in report["findings"] if f is not high[0]]
    (tmp_path / "base.json").write_text(json.dumps(report))
    res = runner.invoke(
        app, ["scan", "--demo", "-q", "--fail-on", "high", "--baseline", "base.json"]
    )
    assert res.exit_code == 1
    assert res.stderr.splitlines()[-1] == "gpuaudit: failing: 1 finding at or above high (1 new)"
    res = runner.invoke(
        app, ["scan", "--demo", "-q", "--fail-on", "high", "--previous", "base.json"]
    )
    assert res.exit_code == 1
    assert res.stderr.splitlines()[-1] == (
        f"gpuaudit: failing: {len(high)} findings at or above high (1 new)"
    )


def test_a_passing_gate_says_nothing_of_failing() -> None:
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json", "--fail-on", "none"])
    assert res.exit_code == 0 and "failing" not in res.stderr


@pytest.mark.parametrize("flag", ["--baseline", "--previous"])
@pytest.mark.parametrize("compressed", [True, False], ids=["gz", "plain"])
def test_a_snapshot_given_as_an_earlier_report_is_named_as_such(
    tmp_path: Path, flag: str, compressed: bool
) -> None:
    snap = DEMO
    if not compressed:
        import gzip

        snap = tmp_path / "demo.snapshot.json"
        snap.write_bytes(gzip.decompress(DEMO.read_bytes()))
    res = runner.invoke(app, ["scan", "--demo", "-q", flag, str(snap)])
    assert res.exit_code == 2
    (line,) = res.stderr.splitlines()
    assert line.startswith(
        f"gpuaudit: error: {flag} {snap} is a gpuaudit snapshot, not a JSON report; {flag} takes "
        "an earlier `scan --format json` report"
    )


@pytest.mark.parametrize(
    "command",
    [
        ["rules", "-o", "{out}"],
        ["scenario", "--gpus", "12", "--days", "1", "-y", "-q", "-o", "{out}"],
        ["scenario", "--gpus", "12", "--days", "1", "-y", "-q", "--truth", "{out}"],
        ["snapshot", "save", "{out}", "--prometheus-url", "http://127.0.0.1:9", "--no-kubernetes"],
    ],
    ids=["rules", "scenario", "scenario-truth", "snapshot-save"],
)
def test_no_command_calls_a_file_it_writes_not_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """Click refused an existing path that cannot be read as "not readable" before the command
    ran: a file a command writes is never read, so it is never refused for that."""
    out = tmp_path / "out.file"
    out.write_text("old")
    real = os.access
    monkeypatch.setattr(
        os,
        "access",
        lambda p, mode, *a, **k: mode != os.R_OK if os.fspath(p) == str(out) else real(p, mode),
    )
    res = runner.invoke(app, [a.replace("{out}", str(out)) for a in command])
    assert "not readable" not in res.output
    if command[0] != "snapshot":  # which has no Prometheus to read
        assert res.exit_code == 0, res.output
        assert out.read_text() != "old"
