"""`--webhook`: the Markdown summary reaches a real HTTP server on loopback as Slack-style JSON,
and failures end in one clear line that never shows the secret part of the URL."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.core.errors import GpuauditError
from gpuaudit.report import webhook
from gpuaudit.scenario import generate, write_snapshot
from gpuaudit.scenario.next_week_cases import generate_next_week
from tests.support.paths import ROOT
from tests.support.reports import write_hostile_snapshot

runner = CliRunner()
SECRET_PATH = "/services/T0SECRET/B0SECRET/xoxSECRETtoken"
SECRET_QUERY = "token=SECRETquery"


@dataclass
class Hook:
    """A loopback incoming webhook: records requests, answers with `status` and `body`."""

    server: ThreadingHTTPServer
    status: int = 200
    body: str = "ok"
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    hold: bool = False

    @property
    def base(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        return f"{self.base}{SECRET_PATH}?{SECRET_QUERY}"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("all_proxy", raising=False)


@pytest.fixture
def hook() -> Iterator[Hook]:
    state: list[Hook] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            h = state[0]
            n = int(self.headers.get("Content-Length", "0"))
            h.requests.append(
                {
                    "path": self.path,
                    "content_type": self.headers.get("Content-Type", ""),
                    "body": self.rfile.read(n),
                }
            )
            if h.hold:
                h.release.wait(timeout=10)  # bounded: the test releases it
            data = h.body.encode()
            try:
                self.send_response(h.status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up first (the timeout test)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    h = Hook(server)
    state.append(h)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield h
    finally:
        h.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _error_line(res: Any) -> str:
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    line: str = lines[0]
    for secret in ("SECRET", "services", "token"):
        assert secret not in res.output
    return line


def test_summary_is_posted_as_slack_json(hook: Hook) -> None:
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json", "--webhook", hook.url])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["findings"]  # the report itself is unchanged
    assert len(hook.requests) == 1
    req = hook.requests[0]
    assert req["path"] == f"{SECRET_PATH}?{SECRET_QUERY}"
    assert req["content_type"] == "application/json"
    doc = json.loads(req["body"])
    assert set(doc) == {"text"}
    text = doc["text"]
    assert text.startswith("**GPU audit: scenario-1**")
    assert re.search(r"Top 5 of \d+ findings:", text) and len(text) <= 3000


def test_webhook_from_the_environment(hook: Hook) -> None:
    res = runner.invoke(app, ["scan", "--demo", "-q"], env={"GPUAUDIT_WEBHOOK": hook.url})
    assert res.exit_code == 0, res.output
    assert len(hook.requests) == 1


def test_server_error_is_one_line_without_the_secret(hook: Hook) -> None:
    hook.status, hook.body = 500, "internal_error"
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "markdown", "--webhook", hook.url])
    assert res.exit_code == 2
    assert _error_line(res) == (
        f"gpuaudit: error: webhook {hook.base} answered HTTP 500 (internal_error); the summary "
        "was not posted (check that the webhook URL is current)"
    )


def test_a_redirect_is_not_followed(hook: Hook) -> None:
    hook.status, hook.body = 302, ""
    with pytest.raises(GpuauditError, match=r"answered HTTP 302;"):
        webhook.post(hook.url, "hi")
    assert len(hook.requests) == 1


def test_an_answer_echoing_the_url_is_scrubbed(hook: Hook) -> None:
    hook.status, hook.body = 404, f"no such hook: {SECRET_PATH}?{SECRET_QUERY}"
    with pytest.raises(GpuauditError) as exc:
        webhook.post(hook.url, "hi")
    assert "SECRET" not in str(exc.value)
    assert str(exc.value).startswith(
        f"webhook {hook.base} answered HTTP 404 (no such hook: <redacted>"
    )


def test_unreachable_server_is_one_line_without_the_secret() -> None:
    with socket.socket() as s:  # a port nobody listens on once this closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}{SECRET_PATH}?{SECRET_QUERY}"
    res = runner.invoke(app, ["scan", "--demo", "-q", "--webhook", url])
    assert res.exit_code == 2
    line = _error_line(res)
    assert line.startswith(f"gpuaudit: error: cannot post to webhook http://127.0.0.1:{port}: ")


def test_slow_server_times_out(hook: Hook) -> None:
    hook.hold = True
    with pytest.raises(GpuauditError) as exc:
        webhook.post(hook.url, "hi", timeout_s=0.5)
    hook.release.set()
    assert str(exc.value) == (
        f"webhook {hook.base} did not answer within 0.5 s; the report was written, but the "
        "summary was not posted"
    )


@pytest.mark.parametrize(
    "url",
    ["hooks.slack.com/services/T0SECRET/B0SECRET/x", "ftp://h/services/SECRET", "", "::::"],
)
def test_not_an_http_url(url: str) -> None:
    with pytest.raises(GpuauditError, match=r"--webhook must be an http:// or https:// URL") as e:
        webhook.post(url, "hi")
    assert "SECRET" not in str(e.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://hooks.slack.com/services/T/B/X", "https://hooks.slack.com"),
        ("https://user:pw@chat.example:8443/hooks/abc?x=1#f", "https://chat.example:8443"),
        ("http://[::1]:8065/hooks/abc", "http://[::1]:8065"),
        ("https://h/p\x1b[31m", "https://h"),
    ],
)
def test_display_url_shows_scheme_and_host_only(url: str, shown: str) -> None:
    assert webhook.display_url(url) == shown


def test_hostile_summary_is_escaped(hook: Hook, tmp_path: Path) -> None:
    snap = write_hostile_snapshot(tmp_path)
    res = runner.invoke(app, ["scan", "--snapshot", str(snap), "-q", "--webhook", hook.url])
    assert res.exit_code == 0, res.output
    text = json.loads(hook.requests[0]["body"])["text"]
    assert "\x1b" not in text and "\r" not in text and "<script>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "x" * 300 not in text and len(text) <= 3000


DEPLOY = ROOT / "deploy"


def _cron_container() -> dict[str, Any]:
    (cron,) = yaml.safe_load_all((DEPLOY / "cronjob.yaml").read_text(encoding="utf-8"))
    container: dict[str, Any] = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    return container


def test_cronjob_script_keeps_a_history_and_posts_once_a_week(hook: Hook, tmp_path: Path) -> None:
    """The CronJob's own script, run by /bin/sh two weeks in a row with the real gpuaudit (only
    the Prometheus collection is replaced: a scenario, then the week after it, issue 34): the
    history keeps both JSON reports and gives the second week the first as last week's."""
    reports, bin_dir = tmp_path / "reports", tmp_path / "bin"
    reports.mkdir()
    bin_dir.mkdir()
    weeks = {"2026-11-23": generate(60, 1, 1), "2026-11-30": generate_next_week(60, 1, 1)}
    for day, sc in weeks.items():
        write_snapshot(sc, tmp_path / f"{day}.json.gz")
    (bin_dir / "gpuaudit").write_text(
        "#!/bin/sh\n"
        'if [ "$1" = snapshot ] && [ "$2" = save ]; then cp "$WEEK_SNAPSHOT" "$3"; exit 0; fi\n'
        f'exec "{sys.executable}" -m gpuaudit "$@"\n'
    )
    (bin_dir / "date").write_text('#!/bin/sh\necho "$FAKE_DAY"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    container = _cron_container()
    assert container["command"] == ["/bin/sh", "-c"]
    script = container["args"][0].replace("out=/reports", f"out={reports}")
    env = {e["name"]: e.get("value", "") for e in container["env"] if "value" in e}
    assert env["GPUAUDIT_GROUP_BY_LABEL"] == "team"
    assert env["GPUAUDIT_HISTORY_KEEP"] == "26"
    for day in weeks:
        run_env = dict(
            os.environ,
            PATH=f"{bin_dir}:{os.environ['PATH']}",
            FAKE_DAY=day,
            WEEK_SNAPSHOT=str(tmp_path / f"{day}.json.gz"),
            GPUAUDIT_WEBHOOK=hook.url,
            GPUAUDIT_GROUP_BY_LABEL="app",
            GPUAUDIT_HISTORY_KEEP="26",
            HOME=str(tmp_path),
            MPLCONFIGDIR=str(tmp_path / "mpl"),
        )
        res = subprocess.run(
            ["/bin/sh", "-c", script], env=run_env, capture_output=True, text=True, timeout=300
        )
        assert res.returncode == 0, res.stderr
    names = sorted(p.name for p in reports.iterdir() if p.is_file())
    assert names == [f"gpuaudit-{d}.{x}" for d in weeks for x in EXTS]
    assert (reports / "snapshots" / "gpuaudit-2026-11-30.snapshot.json.gz").is_file()
    kept = sorted(p.name for p in (reports / "history").iterdir())
    assert kept == ["gpuaudit-20261123T000000Z.json", "gpuaudit-20261130T000000Z.json"]
    second = json.loads((reports / "gpuaudit-2026-11-30.json").read_text())
    assert second["comparison"]["against"] == "gpuaudit-20261123T000000Z.json"
    assert second["comparison"]["realized_savings"]["gpu_hours"] == 336
    md = (reports / "gpuaudit-2026-11-30.md").read_text()
    assert "Since gpuaudit-20261123T000000Z.json" in md and "## The last 2 weeks" in md
    html = (reports / "gpuaudit-2026-11-30.html").read_text()
    assert "Waste by label <code>app</code>" in html
    assert 'aria-label="GPU-hours and findings over the kept weeks"' in html
    texts = [json.loads(r["body"])["text"] for r in hook.requests]
    assert len(texts) == 2  # one post a week, from the one scan
    assert "Since the previous report" not in texts[0]
    assert re.search(
        r"Since the previous report: 1 new, \d+ worse, \d+ improved, 4 resolved", texts[1]
    )
    assert "4 fixed, saving 336.0 GPU-hours and 907 USD a week" in texts[1]


EXTS = ("html", "json", "md")


def test_deploy_manifests_are_read_only_and_locked_down() -> None:
    rbac = (DEPLOY / "rbac.yaml").read_text(encoding="utf-8")
    docs = (ROOT / "docs" / "rbac.yaml").read_text(encoding="utf-8")
    assert list(yaml.safe_load_all(rbac)) == list(yaml.safe_load_all(docs))  # no drift
    kust = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text(encoding="utf-8"))
    assert kust["resources"] == ["rbac.yaml", "pvc.yaml", "cronjob.yaml"]
    (cron,) = yaml.safe_load_all((DEPLOY / "cronjob.yaml").read_text(encoding="utf-8"))
    assert cron["spec"]["schedule"] == "0 6 * * 1"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "gpuaudit"
    assert pod["securityContext"]["runAsNonRoot"] is True
    c = pod["containers"][0]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["resources"]["limits"]["memory"] and c["resources"]["requests"]["cpu"]
    hook_env = next(e for e in c["env"] if e["name"] == "GPUAUDIT_WEBHOOK")
    assert hook_env["valueFrom"]["secretKeyRef"] == {
        "name": "gpuaudit-webhook",
        "key": "url",
        "optional": True,
    }
    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert claims == {"gpuaudit-reports"}


class RawServer:
    """A loopback server that reads one request and answers with `script`'s bytes, as slowly
    or as incompletely as it says: faults no real chat server can be made to produce."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.stop = threading.Event()
        self.script: list[tuple[bytes, float]] = []
        """(bytes, seconds to wait after them) sent in turn; then the connection is held
        open, silent, until `stop`."""
        self.repeat: bytes = b""
        """Sent one byte at a time, over and over, after `script` (until `stop`)."""
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    @property
    def url(self) -> str:
        return f"{self.base}{SECRET_PATH}?{SECRET_QUERY}"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                try:
                    self._answer(conn)
                except OSError:
                    pass  # the client hung up: what the tests want

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        for chunk, pause in self.script:
            conn.sendall(chunk)
            self.stop.wait(pause)
        while self.repeat and not self.stop.is_set():
            for byte in self.repeat:
                conn.sendall(bytes([byte]))
                if self.stop.wait(0.05):
                    return
        self.stop.wait(60)


@pytest.fixture
def raw() -> Iterator[RawServer]:
    server = RawServer()
    try:
        yield server
    finally:
        server.stop.set()
        server.sock.close()
        server.thread.join(timeout=10)


def _post_in_thread(url: str, timeout_s: float) -> str:
    """`webhook.post`'s error, waited for with a deadline far beyond `timeout_s` (a post that
    never ends fails the test instead of hanging it)."""
    said: list[str] = []

    def go() -> None:
        try:
            webhook.post(url, "hi", timeout_s=timeout_s)
        except GpuauditError as exc:
            said.append(str(exc))
        else:
            said.append("posted")

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert said, "the post was still running a minute later"
    return said[0]


def test_an_answer_dribbled_a_byte_at_a_time_ends_at_the_deadline(raw: RawServer) -> None:
    """Each byte comes well within the socket timeout, so only a deadline on the whole
    exchange ends it."""
    raw.repeat = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 60
    said = _post_in_thread(raw.url, 1.0)
    assert said == (
        f"webhook {raw.base} did not answer within 1 s; the report was written, but the summary "
        "was not posted"
    )


def test_a_huge_error_answer_is_not_read_whole(raw: RawServer) -> None:
    """An error answer announces a gigabyte and sends 10 KB: gpuaudit reads a few KB of it,
    says what it read, and does not wait for the rest."""
    raw.script = [
        (b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 1000000000\r\n\r\n", 0),
        (b"boom " * 2000, 0),
    ]
    said = _post_in_thread(raw.url, 5.0)
    assert said.startswith(f"webhook {raw.base} answered HTTP 500 (boom boom boom ")
    assert said.endswith("; the summary was not posted (check that the webhook URL is current)")


def test_a_gzip_bomb_is_decompressed_a_few_kb_only(raw: RawServer) -> None:
    """64 MB of text compressed to some 64 KB, announced as part of a gigabyte: a few KB of it
    are decompressed, and the rest is never asked for."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = b"".join(packer.compress(b"bomb " * 200_000) for _ in range(64))
    raw.script = [
        (
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Encoding: gzip\r\n"
            b"Content-Length: 1000000000\r\n\r\n",
            0,
        ),
        (bomb, 0),
    ]
    said = _post_in_thread(raw.url, 5.0)
    assert said.startswith(f"webhook {raw.base} answered HTTP 503 (bomb bomb ")


@pytest.mark.parametrize(
    "echo",
    [
        "no such hook: xoxSECRETtoken",
        "team T0SECRET is gone",
        "bad key SECRETquery",
        "no hook at /services/T0SECRET/B0SECRET/xoxSECRETtoken",
        "no hook at %2Fservices%2FT0SECRET",
    ],
)
def test_a_server_echoing_a_secret_segment_never_gets_it_printed(hook: Hook, echo: str) -> None:
    hook.status, hook.body = 404, echo
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json", "--webhook", hook.url])
    assert res.exit_code == 2
    line = _error_line(res)
    assert line.startswith(f"gpuaudit: error: webhook {hook.base} answered HTTP 404 (")
    assert "<redacted>" in line


def test_a_webhook_that_is_no_http_url_is_refused_before_the_scan(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = runner.invoke(
        app, ["scan", "--demo", "-q", "-o", str(out), "--webhook", "ftp://h/services/SECRET"]
    )
    assert res.exit_code == 2
    assert _error_line(res).startswith(
        "gpuaudit: error: --webhook must be an http:// or https:// URL with a host, got ftp://h;"
    )
    assert not out.exists()
