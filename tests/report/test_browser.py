"""The HTML report in a real headless Chromium: it renders (a screenshot is kept under
`test-artifacts/` for people to look at), the charts are in the DOM, the page logs no error and
asks the network for nothing, and hostile names stay text.

Chromium is Debian's `chromium` package. Without it these tests skip, unless the `CI`
environment variable is set: then a missing browser fails the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.support.paths import ROOT
from tests.support.reports import HOSTILE, Page, previous_report, write_hostile_snapshot

runner = CliRunner()
TIMEOUT_S = 60.0
WINDOW = (1400, 3000)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    f"--window-size={WINDOW[0]},{WINDOW[1]}",
]


def _find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    path = _find_chromium()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed, and CI is set: install Debian's chromium")
        pytest.skip(
            "chromium is not installed (apt-get install -y --no-install-recommends chromium); "
            "set CI=1 to make this a failure"
        )
    return path


def _render(tmp: Path, *args: str) -> Path:
    out = tmp / "report.html"
    res = runner.invoke(app, ["scan", "-q", "--format", "html", "--output", str(out), *args])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's report with a trend and a label table, as the weekly CronJob writes it."""
    tmp = tmp_path_factory.mktemp("browser")
    js = tmp / "last-week.json"
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json", "-o", str(js)])
    assert res.exit_code == 0, res.output
    js.write_text(json.dumps(previous_report(json.loads(js.read_text()))), encoding="utf-8")
    return _render(tmp, "--demo", "--group-by-label", "app", "--previous", str(js))


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End the browser we started and every process it started (its own process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _run(chromium: str, tmp: Path, *args: str) -> bytes:
    """Run Chromium once to completion; return its stdout."""
    profile = tmp / f"profile-{time.monotonic_ns()}"
    proc = subprocess.Popen(
        [chromium, *FLAGS, f"--user-data-dir={profile}", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _stop(proc)
        pytest.fail(f"chromium {' '.join(args)} did not finish within {TIMEOUT_S:.0f} s")
    _stop(proc)  # renderer or zygote processes may outlive the browser
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    return out


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_screenshot(chromium: str, demo_page: Path, tmp_path: Path) -> None:
    png = tmp_path / "report.png"
    _run(chromium, tmp_path, f"--screenshot={png}", demo_page.as_uri())
    data = png.read_bytes()
    assert _png_size(data) == WINDOW
    from PIL import Image

    with Image.open(png) as im:
        colours = im.convert("RGB").resize((140, 300)).getcolors(maxcolors=100_000) or []
    assert len(colours) > 200  # text, badges and charts, not a blank or error page
    artifacts = ROOT / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    shutil.copyfile(png, artifacts / "report.png")


PRINTED_PAGES = 28
"""Pages the demo's report may take on paper (Chromium's default page): it took 29 before
alike findings folded, the breakdowns moved before them and the tables got denser in print;
18 before the section of `gpuaudit fix`'s changes (at most `MAX_FIXES` rows); 28 since the
demo gained the cases of issues 32-36 (its findings grew from 45 rows to 71) and the report the
ledger by cause (with its chart), the showback table and the changes."""


def test_the_demo_report_prints_on_few_pages(
    chromium: str, demo_page: Path, tmp_path: Path
) -> None:
    pdf = tmp_path / "report.pdf"
    _run(chromium, tmp_path, f"--print-to-pdf={pdf}", "--no-pdf-header-footer", demo_page.as_uri())
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF-")
    pages = len(re.findall(rb"/Type\s*/Page\b", data))
    assert 5 <= pages <= PRINTED_PAGES, pages


def test_dom_has_the_charts_and_no_script(chromium: str, demo_page: Path, tmp_path: Path) -> None:
    dom = _run(chromium, tmp_path, "--dump-dom", demo_page.as_uri()).decode()
    page = Page(dom)
    tags = [t for t, _ in page.elements]
    assert tags.count("svg") == 4
    assert "script" not in tags
    labels = {a.get("aria-label") for t, a in page.elements if t == "svg"}
    assert labels == {
        "Allocated GPU-hours by cause",
        "Fleet GPUs allocated and mean engine activity per hour",
        "Engine activity per namespace and hour",
        "GPUs held and busy per hour, by GPU product",
    }
    text = " ".join(page.text.split())
    assert re.search(r"Findings \(\d+, ranked by wasted GPU-hours; risks listed apart\)", text)
    assert "1 resolved" in text
    # The table of contents links the sections; the risks come before the waste.
    links = [a["href"] for t, a in page.elements if t == "a"]
    assert "#by-namespace" in links and links.index("#risks") < links.index("#waste")


class DevTools:
    """A minimal Chrome DevTools Protocol client over one browser websocket, with flattened
    sessions: send a command and wait for its answer, keeping every event seen meanwhile."""

    def __init__(self, url: str, deadline: float) -> None:
        import websocket

        self.deadline = deadline
        self.ws = websocket.create_connection(url, timeout=self._left(), suppress_origin=True)
        self.events: list[dict[str, Any]] = []
        self._id = 0

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the browser did not answer in time")
        return left

    def _recv(self) -> dict[str, Any]:
        self.ws.settimeout(self._left())
        msg: dict[str, Any] = json.loads(self.ws.recv())
        return msg

    def send(self, method: str, params: dict[str, Any] | None = None, session: str = "") -> Any:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        while True:
            answer = self._recv()
            if answer.get("id") == self._id:
                assert "error" not in answer, (method, answer["error"])
                return answer.get("result", {})
            self.events.append(answer)

    def wait_for(self, method: str, session: str) -> dict[str, Any]:
        seen = (e for e in self.events if e.get("method") == method)
        for e in seen:
            if e.get("sessionId") == session:
                return e
        while True:
            e = self._recv()
            self.events.append(e)
            if e.get("method") == method and e.get("sessionId") == session:
                return e

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close()


@contextlib.contextmanager
def _browser(chromium: str, tmp: Path) -> Iterator[DevTools]:
    """A headless Chromium with DevTools on a free port (read from `DevToolsActivePort`)."""
    profile = tmp / "profile-devtools"
    log = (tmp / "chromium.log").open("wb")
    proc = subprocess.Popen(
        [chromium, *FLAGS, "--remote-debugging-port=0", f"--user-data-dir={profile}"]
        + ["about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )
    deadline = time.monotonic() + TIMEOUT_S
    client: DevTools | None = None
    try:
        active = profile / "DevToolsActivePort"
        lines: list[str] = []
        while len(lines) < 2:
            assert proc.poll() is None, (tmp / "chromium.log").read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            if active.is_file():
                lines = active.read_text().split()
            if len(lines) < 2:
                time.sleep(0.05)  # polling a file the browser writes, under the deadline
        client = DevTools(f"ws://127.0.0.1:{lines[0]}{lines[1]}", deadline)
        yield client
        with contextlib.suppress(Exception):
            client.send("Browser.close")
    finally:
        if client is not None:
            client.close()
        _stop(proc)
        log.close()


def test_page_logs_no_error_and_fetches_nothing(
    chromium: str, demo_page: Path, tmp_path: Path
) -> None:
    with _browser(chromium, tmp_path) as cdp:
        target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Runtime", "Log", "Page", "Network"):
            cdp.send(f"{domain}.enable", session=session)
        nav = cdp.send("Page.navigate", {"url": demo_page.as_uri()}, session)
        assert not nav.get("errorText"), nav
        cdp.wait_for("Page.loadEventFired", session)
        probe = (
            "JSON.stringify({svgs: document.querySelectorAll('svg').length,"
            " scripts: document.scripts.length,"
            " overflow: document.documentElement.scrollWidth > window.innerWidth,"
            " width: window.innerWidth})"
        )
        found = json.loads(
            cdp.send("Runtime.evaluate", {"expression": probe, "returnByValue": True}, session)[
                "result"
            ]["value"]
        )
        events = [e for e in cdp.events if e.get("sessionId") == session]
    assert found == {"svgs": 4, "scripts": 0, "overflow": False, "width": WINDOW[0]}
    errors = [
        e
        for e in events
        if e["method"] == "Runtime.exceptionThrown"
        or (
            e["method"] == "Runtime.consoleAPICalled"
            and e["params"].get("type") in ("error", "assert", "warning")
        )
        or (e["method"] == "Log.entryAdded" and e["params"]["entry"].get("level") == "error")
        or e["method"] == "Network.loadingFailed"
    ]
    assert errors == []
    fetched = [
        e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"
    ]
    assert fetched and all(u.startswith(("file:", "data:")) for u in fetched), fetched


def test_hostile_names_render_as_text(chromium: str, tmp_path: Path) -> None:
    snap = write_hostile_snapshot(tmp_path)
    page_file = _render(tmp_path, "--snapshot", str(snap), "--group-by-label", "team")
    dom = _run(chromium, tmp_path, "--dump-dom", page_file.as_uri()).decode()
    page = Page(dom)
    assert not page.tags() & {"script", "img", "b", "i", "iframe"}
    assert all(a["href"].startswith("#") for t, a in page.elements if t == "a")
    assert HOSTILE["html"] in page.text
    assert "pod-[bold]x[/bold]-[link](http://evil.example/x)" in page.text
    assert "evil-\\x1b[31mred\\x1b[0m" in page.text
