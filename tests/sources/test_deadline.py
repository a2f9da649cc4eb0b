"""A Prometheus-compatible backend cannot make a collection outlast its deadline: a server that
accepts connections and never answers ends the scan at its first request, the build
information, within one `--timeout`; retries and their waits never run past the collection's
allowance (`--timeout` for each request it needs); each ends in one line, exit code 2, naming
the request that hung. Through the CLI and real HTTP: a silent server (tests/support/silent.py)
and the fault server with no backend behind it (tests/support/promfault.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx
import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.sources.prometheus.http import CollectionOverdue, PromClient, PromConfig, PromError
from gpuaudit.sources.transfer import Allowance
from tests.support.promfault import Call, PromFaultServer, Reply, answer
from tests.support.silent import SilentServer

runner = CliRunner()
BUILDINFO = "/api/v1/status/buildinfo"
NAMES = "/api/v1/label/__name__/values"
QUERY = "/api/v1/query"


def _scan(url: str, *extra: str) -> tuple[int, list[str]]:
    args = ["scan", "-q", "-f", "json", "--prometheus-url", url, "--no-kubernetes"]
    res = runner.invoke(app, [*args, "--window", "2h", *extra])
    return res.exit_code, [ln for ln in res.output.splitlines() if ln.strip()]


def test_a_server_that_never_answers_ends_the_scan_at_its_build_info() -> None:
    with SilentServer() as srv:
        began = time.monotonic()
        secret_url = srv.url.replace("http://", "http://auditor:s3cret-pw@") + "/?token=t0p-s3cret"
        code, lines = _scan(secret_url, "--timeout", "1")
        took = time.monotonic() - began
        assert srv.accepted == 1  # no retry, and nothing sent after the build information
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"gpuaudit: error: Prometheus at {srv.url} did not answer {BUILDINFO} within 1 s: "
        "the connection was accepted, but no complete answer came; check that the server "
    ), lines[0]
    assert "raise --timeout" in lines[0] and "shorter --window" not in lines[0]
    assert "s3cret" not in lines[0] and "Traceback" not in lines[0]
    # Only a guard that it ends (a wide margin, not a timing): before, about 14 x --timeout.
    assert took < 10


def _busy(call: Call, upstream: object) -> Reply:
    """Everything but the build information: 503, try again in 30 s."""
    return Reply(
        503,
        b'{"status":"error","errorType":"unavailable","error":"busy"}',
        {"Content-Type": "application/json", "Retry-After": "30"},
    )


def test_retries_never_wait_past_the_collections_deadline() -> None:
    info = json.dumps({"status": "success", "data": {"version": "2.53.0"}}).encode()
    faults = [answer((BUILDINFO,), Reply(200, info)), _busy]
    with PromFaultServer(None, faults) as srv:
        url = srv.url
        # One query in flight, so that the first query that fails is the last one sent.
        code, lines = _scan(url, "--timeout", "0.5", "--parallel-queries", "1")
        paths = srv.paths()
    assert code == 2
    assert len(lines) == 1, lines
    # The 30 s the server asks to wait is longer than what is left of the collection's
    # allowance (0.5 s a request): no request is tried again, and the first query that fails
    # ends the scan with the server's own words (discovery's calls fail softly, as before).
    assert lines[0] == f"gpuaudit: error: {url}{paths[-1]}: unavailable: busy", lines
    # Each sent once: the build information, metric names, label names, the scrape interval's
    # query, the recording rules, then the first query of the collection.
    assert paths == [BUILDINFO, NAMES, "/api/v1/labels", QUERY, "/api/v1/rules", QUERY], paths


def _client(handler: Callable[[httpx.Request], httpx.Response], sleeps: list[float]) -> PromClient:
    return PromClient(
        PromConfig(url="http://prom.test", timeout_s=2.0),
        transport=httpx.MockTransport(handler),
        sleep=sleeps.append,
    )


def _busy_answer(req: httpx.Request) -> httpx.Response:
    body = {"status": "error", "error": "busy"}
    return httpx.Response(503, json=body, headers={"Retry-After": "30"})


def test_a_wait_that_does_not_fit_the_allowance_is_not_begun() -> None:
    sleeps: list[float] = []
    client = _client(_busy_answer, sleeps)
    client.allowance = Allowance(2.0, requests=1)
    with pytest.raises(PromError, match="busy"):
        client.query("up", 0)
    assert sleeps == [] and client.requests == 1
    # With room for them, the waits the server asks for are waited (the sleep is a stand-in).
    client.allowance = Allowance(2.0, requests=100)
    with pytest.raises(PromError, match="busy"):
        client.query("up", 0)
    assert sleeps == [30.0, 30.0, 30.0]


def test_a_spent_allowance_ends_the_request_naming_it() -> None:
    client = _client(_busy_answer, [])
    client.allowance = Allowance(2.0, requests=0)
    with pytest.raises(CollectionOverdue) as err:
        client.query("up", 0)
    assert str(err.value) == (
        "Prometheus at http://prom.test went past the collection's deadline of 0.0 s (--timeout "
        "2 s for each of 0 requests it needed) while waiting for /api/v1/query: it answers too "
        "slowly, or not at all; check its load, or raise --timeout"
    )
    assert client.requests == 0


def test_a_try_the_allowance_cuts_short_ends_the_request() -> None:
    with SilentServer() as srv:
        client = PromClient(PromConfig(url=srv.url, timeout_s=30.0))
        client.allowance = Allowance(0.5, requests=1)
        with pytest.raises(
            CollectionOverdue, match=r"deadline of 0\.5 s \(--timeout 0\.5 s for the one "
        ):
            client.query("up", 0)
        client.close()
