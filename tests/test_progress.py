"""Progress everywhere a run takes time, on a terminal only and on stderr; and sources checked
before the long work starts (a wrong `--kubeconfig` before any Prometheus query)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaudit.app import config, pipeline
from gpuaudit.checks import discover
from gpuaudit.cli import app
from tests.support.paths import DEMO, ROOT
from tests.support.reports import demo_result

runner = CliRunner()


class Recorder:
    """A `gpuaudit.core.progress.Progress` that records what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple[object, ...]] = []

    @contextmanager
    def stage(self, label: str, unit: str = "") -> Iterator[_Stage]:
        self.events.append(("open", label, unit))
        yield _Stage(self, label)
        self.events.append(("close", label))

    def stages(self) -> list[str]:
        return [str(e[1]) for e in self.events if e[0] == "open"]

    def ticks(self, label: str) -> list[tuple[object, ...]]:
        return [e[2:] for e in self.events if e[0] == "tick" and e[1] == label]


class _Stage:
    def __init__(self, rec: Recorder, label: str) -> None:
        self.rec, self.label = rec, label

    def __call__(self, done: int, total: int) -> None:
        self.rec.events.append(("tick", self.label, done, total))

    def note(self, text: str) -> None:
        self.rec.events.append(("note", self.label, text))


def test_an_offline_scan_reports_loading_inventory_and_checks(tmp_path: Path) -> None:
    cfg = config.for_scan({"demo": True, "format": "json", "output": tmp_path / "r.json"})
    rec = Recorder()
    pipeline.run(cfg, progress=rec)
    assert rec.stages() == ["loading the snapshot", "building the inventory", "running the checks"]
    loads = rec.ticks("loading the snapshot")
    size = DEMO.stat().st_size
    assert loads and loads[-1] == (size, size)
    assert all(0 <= int(str(d)) <= size and t == size for d, t in loads)
    n = len(discover())
    assert rec.ticks("running the checks") == [(i, n) for i in range(n + 1)]
    # Every stage is closed before the report is written.
    assert rec.events[-1] == ("close", "running the checks")


def _run_on_a_terminal(args: list[str], columns: int = 100) -> tuple[str, str]:
    """Run gpuaudit with stderr on a pseudo-terminal and stdout on a pipe; return (what the
    terminal got, stdout)."""
    main, secondary = pty.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(columns))
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuaudit", *args],
        stdout=subprocess.PIPE,
        stderr=secondary,
        cwd=ROOT,
        env=env,
    )
    os.close(secondary)
    got = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the other end is closed
                return
            if not chunk:
                return
            got.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    out, _ = proc.communicate(timeout=300)
    reader.join(timeout=60)
    os.close(main)
    return got.decode("utf-8", "replace"), out.decode()


def test_progress_shows_on_a_terminal_on_stderr_only() -> None:
    term, out = _run_on_a_terminal(["scan", "--demo", "-f", "json"])
    for label in ("loading the snapshot", "building the inventory", "running the checks"):
        assert label in term, term
    ran = len(demo_result().checks_run)
    assert term.rstrip().endswith(f"{ran} checks ran, 0 skipped")
    assert out.startswith("{") and "loading the snapshot" not in out


def test_no_progress_when_quiet_or_not_a_terminal() -> None:
    term, out = _run_on_a_terminal(["scan", "--demo", "-f", "json", "-q"])
    assert term == "" and out.startswith("{")
    res = runner.invoke(app, ["scan", "--demo", "-f", "json"])
    assert res.exit_code == 0
    found = f"gpuaudit: {len(demo_result().findings)} findings, "
    assert res.stderr.startswith(found) and "loading" not in res.stderr


class _Recording(BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        self.seen.append(self.path)
        self.send_response(404)
        self.end_headers()

    do_POST = do_GET  # noqa: N815

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []
    handler = type("Handler", (_Recording,), {"seen": seen})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", seen
    finally:
        srv.shutdown()
        srv.server_close()


KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: "t0ken-not-shown"}
contexts:
- name: prod
  context: {cluster: c, user: u}
current-context: prod
"""


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        (["--kubeconfig", "{tmp}/missing"], "--kubeconfig names {tmp}/missing, which does not"),
        (["--kubeconfig", "{tmp}/kc", "--context", "staging"], "context 'staging' is not in"),
        (["--kubeconfig", "{tmp}/broken"], "--kubeconfig names {tmp}/broken, which is not valid"),
    ],
)
@pytest.mark.parametrize("command", [["scan"], ["snapshot", "save", "{tmp}/s.json"]])
def test_a_wrong_kubeconfig_is_reported_before_any_prometheus_query(
    server: tuple[str, list[str]],
    tmp_path: Path,
    command: list[str],
    extra: list[str],
    error: str,
) -> None:
    url, seen = server
    (tmp_path / "kc").write_text(KUBECONFIG)
    (tmp_path / "broken").write_text("clusters: [\n")
    args = [a.replace("{tmp}", str(tmp_path)) for a in [*command, *extra]]
    res = runner.invoke(app, [*args, "--prometheus-url", url, "-q"])
    assert res.exit_code == 2
    assert error.replace("{tmp}", str(tmp_path)) in res.stderr
    assert res.stderr.startswith("gpuaudit: error: ") and len(res.stderr.splitlines()) == 1
    assert seen == [], "Prometheus was queried before the kubeconfig was checked"
    assert "t0ken" not in res.output


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("prometheus:9090", "--prometheus-url must start with http:// or https://"),
        ("http://", "is not a well-formed URL with a host"),
        ("https://:9090/api", "is not a well-formed URL with a host"),
    ],
)
def test_a_malformed_url_is_refused_up_front(url: str, error: str) -> None:
    res = runner.invoke(app, ["scan", "--prometheus-url", url, "--no-kubernetes"])
    assert res.exit_code == 2 and error in res.stderr
